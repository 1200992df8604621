//! Real Caffe files against their ground truth (`*.expected.json`), through
//! the runtime (the `blobflow` command's own tests hold `inspect --json`
//! against the same truth); round trips; fields blobflow does not model
//! surviving a rewrite.

use blobflow::prelude::*;
use blobflow::proto::{BlobProto, BlobShape, LayerParameter, Message, NetParameter};
use serde_json::Value;

#[path = "support/ground_truth.rs"]
mod ground_truth;
use ground_truth::{check_blob, expected_files, fixtures};

fn check_runtime_blob(what: &str, want: &Value, proto: &BlobProto) {
    // Through a Blob<f64>, so f32 and f64 files alike compare exactly.
    let blob = Blob::<f64>::from_proto(proto).unwrap_or_else(|e| panic!("{what}: {e}"));
    let data = blob.cpu_data().unwrap();
    let sum: f64 = data.iter().map(|v| v.abs()).sum();
    let first: Vec<f64> = data.iter().take(5).copied().collect();
    check_blob(
        what,
        want,
        &proto.stored_shape(),
        blob.count() as u64,
        sum,
        &first,
    );
    let diff_count = want["diff_count"].as_u64().unwrap_or(0) as usize;
    let has_diff = proto.diff.len().max(proto.double_diff.len());
    assert_eq!(has_diff, diff_count, "{what}: diff count");
}

#[test]
fn every_fixture_matches_its_ground_truth_through_the_runtime() {
    for (path, want) in expected_files() {
        let what = path.display().to_string();
        if let Some(layers) = want["layers"].as_array() {
            let model = CaffeModel::open(&path).unwrap();
            assert_eq!(model.name(), want["name"].as_str(), "{what}: name");
            let got: Vec<_> = model.layers().collect();
            assert_eq!(got.len(), layers.len(), "{what}: layer count");
            for (l, w) in got.iter().zip(layers) {
                assert_eq!(l.name(), w["name"].as_str().unwrap(), "{what}");
                let want_type = w["type"].as_str().unwrap();
                // V1 types are written "CONVOLUTION(4)" in the ground truth.
                let want_type = want_type.split('(').next().unwrap();
                assert_eq!(l.type_name(), want_type, "{what}: {}", l.name());
                let wb = w["blobs"].as_array().unwrap();
                assert_eq!(l.blobs().len(), wb.len(), "{what}: {} blobs", l.name());
                for (i, (b, wb)) in l.blobs().iter().zip(wb).enumerate() {
                    check_runtime_blob(&format!("{what}: {}[{i}]", l.name()), wb, b);
                }
            }
        } else {
            let bytes = std::fs::read(&path).unwrap();
            let proto: BlobProto = blobflow::proto::decode_message("BlobProto", &bytes).unwrap();
            check_runtime_blob(&what, &want["blob"], &proto);
            // And through the file helper, in f32.
            let b = blobflow::runtime::read_blob_file::<f32>(&path).unwrap();
            assert_eq!(b.count() as u64, want["blob"]["count"].as_u64().unwrap());
        }
    }
}

#[test]
fn blobs_round_trip_in_both_precisions_with_and_without_diff() {
    fn round<T: MathElement>(write_diff: bool) {
        let b = Blob::<T>::new(&[2, 3, 4]).unwrap();
        for (i, v) in b.mutable_cpu_data().unwrap().iter_mut().enumerate() {
            *v = T::from_f64(i as f64 * 0.5 - 3.0);
        }
        for (i, v) in b.mutable_cpu_diff().unwrap().iter_mut().enumerate() {
            *v = T::from_f64(-(i as f64) * 0.25);
        }
        let bytes = b.to_proto(write_diff).unwrap().encode_to_vec();
        let back = Blob::<T>::from_proto(&BlobProto::decode(&bytes[..]).unwrap()).unwrap();
        assert_eq!(back.shape(), b.shape());
        assert_eq!(&*back.cpu_data().unwrap(), &*b.cpu_data().unwrap());
        if write_diff {
            assert_eq!(&*back.cpu_diff().unwrap(), &*b.cpu_diff().unwrap());
        } else {
            assert_eq!(back.diff_head(), Head::Uninitialized, "no diff in the file");
        }
    }
    round::<f32>(false);
    round::<f32>(true);
    round::<f64>(false);
    round::<f64>(true);
}

#[test]
fn caffe_written_blobs_are_rewritten_byte_for_byte_by_to_proto() {
    // ToProto + serialize of what FromProto read gives Caffe's own bytes.
    for (name, diff) in [
        ("blob_1x3x4x5_f32", false),
        ("blob_1x3x4x5_f32_diff", true),
        ("blob_2x1x3x1x2_f32", false),
        ("blob_scalar_f32", false),
    ] {
        let path = fixtures().join(format!("caffe-written/{name}.binaryproto"));
        let bytes = std::fs::read(&path).unwrap();
        let blob = Blob::<f32>::from_proto(&BlobProto::decode(&bytes[..]).unwrap()).unwrap();
        assert_eq!(
            blob.to_proto(diff).unwrap().encode_to_vec(),
            bytes,
            "{name}"
        );
    }
    for (name, diff) in [("blob_1x3x4x5_f64", false), ("blob_1x3x4x5_f64_diff", true)] {
        let path = fixtures().join(format!("caffe-written/{name}.binaryproto"));
        let bytes = std::fs::read(&path).unwrap();
        let blob = Blob::<f64>::from_proto(&BlobProto::decode(&bytes[..]).unwrap()).unwrap();
        assert_eq!(
            blob.to_proto(diff).unwrap().encode_to_vec(),
            bytes,
            "{name}"
        );
    }
}

#[test]
fn scalar_blob_reads_as_zero_axes_count_one() {
    let b = blobflow::runtime::read_blob_file::<f32>(
        fixtures().join("caffe-written/blob_scalar_f32.binaryproto"),
    )
    .unwrap();
    assert_eq!(b.num_axes(), 0);
    assert_eq!(b.count(), 1);
}

#[test]
fn legacy_shape_equals_matches_caffe() {
    let path = fixtures().join("caffe-written/blob_legacy_1x1x3x2_f32_diff.binaryproto");
    let p = BlobProto::decode(&std::fs::read(path).unwrap()[..]).unwrap();
    // Caffe's test_blob LegacyBlobProtoShapeEquals cases.
    assert!(Blob::<f32>::new(&[3, 2]).unwrap().shape_equals(&p));
    assert!(Blob::<f32>::new(&[1, 3, 2]).unwrap().shape_equals(&p));
    assert!(!Blob::<f32>::new(&[2, 3, 2]).unwrap().shape_equals(&p));
    let with = |n| BlobProto {
        num: Some(n),
        channels: Some(1),
        height: Some(3),
        width: Some(2),
        ..Default::default()
    };
    assert!(
        !Blob::<f32>::new(&[3, 2]).unwrap().shape_equals(&with(0)),
        "explicit 0 counts"
    );
    assert!(!Blob::<f32>::new(&[3, 2]).unwrap().shape_equals(&with(3)));
    // FromProto with reshape takes exactly [n, c, h, w].
    let b = Blob::<f32>::from_proto(&p).unwrap();
    assert_eq!(b.shape(), &[1, 1, 3, 2]);
    assert_eq!(
        &*b.cpu_diff().unwrap(),
        &[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]
    );
    // Without reshape it loads into the right-aligned equal shape.
    let mut t = Blob::<f32>::new(&[3, 2]).unwrap();
    t.load_proto(&p, false).unwrap();
    assert_eq!(t.data_at(&[2, 1]), 6.0);
    let mut wrong = Blob::<f32>::new(&[6]).unwrap();
    let err = wrong.load_proto(&p, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot load blob of shape 1 1 3 2 (6) into 6 (6): shape mismatch (reshape not set)"
    );
}

#[test]
fn weights_load_with_caffe_rules_and_messages() {
    let v1 = CaffeModel::open(fixtures().join("lenet_v1/lenet_iter_10000.caffemodel")).unwrap();
    // V1 bias 1x1x1x20 loads into a blob of shape (20); weights 20x1x5x5.
    let mut conv1 = vec![
        Blob::<f32>::new(&[20, 1, 5, 5]).unwrap(),
        Blob::<f32>::new(&[20]).unwrap(),
    ];
    v1.copy_layer_into("conv1", &mut conv1).unwrap();
    assert!((conv1[1].asum_data().unwrap() - 2.206269).abs() < 1e-5);
    // ip1 in V1 is 1x1x500x800: loads into (500, 800).
    let mut ip1 = vec![
        Blob::<f32>::new(&[500, 800]).unwrap(),
        Blob::<f32>::new(&[500]).unwrap(),
    ];
    let mut ip2 = vec![Blob::<f32>::new(&[10, 500]).unwrap()];
    let err = v1
        .copy_trained_layers_into(&mut [("ip1", ip1.as_mut_slice()), ("ip2", ip2.as_mut_slice())])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Incompatible number of blobs for layer ip2: the file has 2, the target has 1"
    );
    let mut ip2 = vec![
        Blob::<f32>::new(&[10, 500]).unwrap(),
        Blob::<f32>::new(&[10]).unwrap(),
    ];
    let mut nope = vec![Blob::<f32>::new(&[1]).unwrap()];
    let report = v1
        .copy_trained_layers_into(&mut [
            ("ip1", ip1.as_mut_slice()),
            ("ip2", ip2.as_mut_slice()),
            ("not_in_file", nope.as_mut_slice()),
        ])
        .unwrap();
    assert_eq!(report.copied, ["ip1", "ip2"]);
    assert!(report.ignored.contains(&"conv1".to_string()));
    assert_eq!(report.missing, ["not_in_file"]);

    let new = CaffeModel::open(fixtures().join("lenet/lenet_iter_10000.caffemodel")).unwrap();
    let mut wrong = vec![
        Blob::<f32>::new(&[20, 1, 5, 4]).unwrap(),
        Blob::<f32>::new(&[20]).unwrap(),
    ];
    let err = new.copy_layer_into("conv1", &mut wrong).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Cannot copy param 0 weights from layer 'conv1'; shape mismatch.  Source param shape is 20 1 5 5 (500); \
         target param shape is 20 1 5 4 (400). To learn this layer's parameters from scratch rather than copying \
         from a saved net, rename the layer."
    );
    assert!(matches!(
        new.layer_blobs::<f32>("nope"),
        Err(BlobError::LayerNotFound { .. })
    ));
}

#[test]
fn rewritten_models_keep_every_field_they_do_not_model() {
    for file in [
        "lenet/lenet_iter_10000.caffemodel",
        "lenet_v1/lenet_iter_10000.caffemodel",
        "mtcnn_det1/det1.caffemodel",
    ] {
        let path = fixtures().join(file);
        let original = std::fs::read(&path).unwrap();
        let mut model = CaffeModel::open(&path).unwrap();
        assert_eq!(
            model.to_bytes().unwrap(),
            original,
            "{file}: unchanged round trip"
        );
        // Change the first layer with blobs, write, read back.
        let name = model
            .layers()
            .find(|l| !l.blobs().is_empty())
            .unwrap()
            .name()
            .to_string();
        let blobs = model.layer_blobs::<f32>(&name).unwrap();
        let saved = blobs
            .iter()
            .map(|b| b.to_proto(false).unwrap())
            .collect::<Vec<_>>();
        blobs[0].scale_data(2.0).unwrap();
        model
            .set_layer_blobs(&name, &blobs.iter().collect::<Vec<_>>(), false)
            .unwrap();
        let changed = model.to_bytes().unwrap();
        assert_ne!(changed, original);
        let back = CaffeModel::from_bytes(&changed).unwrap();
        let b0 = back.layer_blobs::<f32>(&name).unwrap();
        assert_eq!(
            b0[0].asum_data().unwrap(),
            2.0 * Blob::<f32>::from_proto(&saved[0])
                .unwrap()
                .asum_data()
                .unwrap()
        );
        // Restoring the blobs as Caffe would write them gives the original
        // file back: nothing else moved.
        let mut restored = CaffeModel::from_bytes(&changed).unwrap();
        let orig_blobs: Vec<Blob<f32>> =
            saved.iter().map(|p| Blob::from_proto(p).unwrap()).collect();
        restored
            .set_layer_blobs(&name, &orig_blobs.iter().collect::<Vec<_>>(), false)
            .unwrap();
        assert_eq!(restored.to_bytes().unwrap(), original, "{file}: restored");
    }
}

#[test]
fn fork_extension_fields_survive_a_rewrite() {
    // A layer with an SSD-style extension field 202 and an unknown
    // top-level field 999, around a real blob.
    let blob = BlobProto {
        shape: Some(BlobShape { dim: vec![2] }),
        data: vec![1.0, 2.0],
        ..Default::default()
    };
    let mut layer = Vec::new();
    layer.extend([0x0a, 0x02, b'c', b'1']); // name "c1"
    layer.extend([0x12, 0x04, b'C', b'o', b'n', b'v']); // type "Conv"
    let body = blob.encode_to_vec();
    layer.push(0x3a); // blobs (7), length-delimited
    layer.push(body.len() as u8);
    layer.extend(&body);
    let ext: [u8; 7] = [0xd2, 0x0c, 0x04, 0xde, 0xad, 0xbe, 0xef]; // field 202, 4 bytes
    layer.extend(ext);
    let mut file = vec![0xa2, 0x06, layer.len() as u8]; // layer (100)
    file.extend(&layer);
    let top_unknown = [0xb8, 0x3e, 0x07]; // field 999, varint 7
    file.extend(top_unknown);

    let mut model = CaffeModel::from_bytes(&file).unwrap();
    assert_eq!(model.to_bytes().unwrap(), file);
    let w = Blob::<f32>::new(&[2]).unwrap();
    w.mutable_cpu_data().unwrap().copy_from_slice(&[5.0, 6.0]);
    model.set_layer_blobs("c1", &[&w], false).unwrap();
    let out = model.to_bytes().unwrap();
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    assert!(find(&out, &ext), "field 202 kept byte for byte");
    assert!(
        out.ends_with(&top_unknown),
        "top-level unknown field kept in place"
    );
    let back = NetParameter::decode(&out).unwrap();
    assert_eq!(back.layer("c1").unwrap().blobs()[0].data, [5.0, 6.0]);
    // And a layer built from scratch can be added.
    let mut net = back;
    net.push_layer(LayerParameter::new("new", "ReLU", vec![]));
    assert_eq!(
        NetParameter::decode(&net.encode_to_vec().unwrap())
            .unwrap()
            .layers()
            .len(),
        2
    );
}

/// A V1 model rewritten through the weights API keeps its blobs in the
/// legacy num/channels/height/width fields, as Caffe wrote them: the file
/// comes back byte for byte, and Caffe's loading rules (right-aligned
/// legacy shapes) still put the 1x1x1xN biases into LeNet's (N).
#[test]
fn a_v1_model_rewritten_through_the_weights_api_is_the_same_file() {
    let path = fixtures().join("lenet_v1/lenet_iter_10000.caffemodel");
    let original = std::fs::read(&path).unwrap();
    let mut model = CaffeModel::open(&path).unwrap();
    let names: Vec<String> = model
        .layers()
        .filter(|l| !l.blobs().is_empty())
        .map(|l| l.name().to_string())
        .collect();
    assert_eq!(names, ["conv1", "conv2", "ip1", "ip2"]);
    for name in &names {
        let blobs = model.layer_blobs::<f32>(name).unwrap();
        assert_eq!(blobs[1].num_axes(), 4, "{name}: legacy bias comes back 4-D");
        model
            .set_layer_blobs(name, &blobs.iter().collect::<Vec<_>>(), false)
            .unwrap();
    }
    let rewritten = model.to_bytes().unwrap();
    // Per blob: which legacy dims are stored, and whether a `shape` is.
    type Header = ([Option<i32>; 4], bool);
    let headers = |bytes: &[u8]| -> Vec<Header> {
        let net = NetParameter::decode(bytes).unwrap();
        net.iter_layers()
            .flat_map(|l| l.blobs().to_vec())
            .map(|b| ([b.num, b.channels, b.height, b.width], b.shape.is_some()))
            .collect()
    };
    assert_eq!(headers(&rewritten), headers(&original));
    assert_eq!(rewritten, original, "the rewrite is the file Caffe wrote");

    let mut net = blobflow::layers::net::Net::<f32>::from_file(
        concat!(env!("CARGO_MANIFEST_DIR"), "/models/lenet/lenet.prototxt"),
        blobflow::layers::net::NetState::test(),
    )
    .unwrap();
    net.copy_from(&CaffeModel::from_bytes(&rewritten).unwrap())
        .unwrap();
    let conv1_bias = &net.layer_blobs("conv1").unwrap()[1];
    assert_eq!(conv1_bias.shape(), &[20]);
    assert!((conv1_bias.asum_data().unwrap() - 2.206269).abs() < 1e-5);

    // A blob whose shape the user changed is written new-style.
    let wider = Blob::<f32>::new(&[30]).unwrap();
    let w = model.layer_blobs::<f32>("conv1").unwrap();
    model
        .set_layer_blobs("conv1", &[&w[0], &wider], false)
        .unwrap();
    let conv1 = NetParameter::decode(&model.to_bytes().unwrap())
        .unwrap()
        .layer("conv1")
        .unwrap()
        .blobs()[1]
        .clone();
    assert_eq!(
        (conv1.num, conv1.shape.map(|s| s.dim)),
        (None, Some(vec![30]))
    );
}
