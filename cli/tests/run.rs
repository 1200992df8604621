//! `blobflow run` and `blobflow time` on MTCNN's real nets.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use blobflow::Blob;
use blobflow::runtime::npy;

fn mtcnn(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/nets/mtcnn")
        .join(file)
}

fn blobflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

#[test]
fn run_writes_the_reference_outputs_at_the_files_size() {
    let dir = std::env::temp_dir().join(format!("blobflow-run-{}", std::process::id()));
    let input = mtcnn("det1_60x80_input.npy");
    let out = blobflow(&[
        "run",
        mtcnn("det1.prototxt").to_str().unwrap(),
        mtcnn("det1.caffemodel").to_str().unwrap(),
        "--input",
        &format!("data={}", input.display()),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "det1_60x80_input.npy (1 3 60 80 (14400); the net is built at the file's shape)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("output prob1: 1 2 25 35 (1750)"),
        "{stdout}"
    );
    for name in ["conv4-2", "prob1"] {
        let got: Blob<f32> = npy::read(dir.join(format!("{name}.npy"))).unwrap();
        let want: Blob<f32> = npy::read(mtcnn(&format!("det1_60x80_out_{name}.npy"))).unwrap();
        assert_eq!(got.shape(), want.shape());
        for (g, w) in got.to_vec().unwrap().iter().zip(want.to_vec().unwrap()) {
            assert!(
                (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                "{name}: {g} vs {w}"
            );
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn run_says_what_it_filled_and_refuses_what_it_cannot_do() {
    let net = mtcnn("det2.prototxt");
    let weights = mtcnn("det2.caffemodel");
    let mtcnn_weights = weights.to_str().unwrap();
    let out = blobflow(&["run", net.to_str().unwrap(), "--shape", "data=3,3,24,24"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("weights: none given"), "{stdout}");
    assert!(
        stdout.contains("input data: none given, filled with zeros (3 3 24 24 (5184))"),
        "{stdout}"
    );
    assert!(stdout.contains("output prob1: 3 2 (6)"), "{stdout}");

    let image = format!("image={}", mtcnn("det2_input.npy").display());
    for (args, want) in [
        (
            vec!["--input", image.as_str()],
            "the net has no input named \"image\" (its inputs: data)",
        ),
        (
            vec!["--shape", "data=1,3,x"],
            "\"x\" in shape \"1,3,x\" is not a dimension",
        ),
        (
            // The net is built at the shape given: R-Net's trained
            // weights do not fit a 30 x 30 input.
            vec![mtcnn_weights, "--shape", "data=1,3,30,30"],
            "Cannot copy param 0 weights from layer 'conv4'; shape mismatch",
        ),
        (vec!["--input", "data=/no/such.npy"], "/no/such.npy"),
    ] {
        let mut all = vec!["run", net.to_str().unwrap()];
        all.extend(args);
        let out = blobflow(&all);
        assert!(!out.status.success());
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with("blobflow run: ") && stderr.contains(want),
            "{stderr}"
        );
    }
    #[cfg(not(feature = "cuda"))]
    for device in ["cuda", "cuda:1"] {
        let out = blobflow(&["run", net.to_str().unwrap(), "--device", device]);
        assert!(
            text(&out.stderr).contains("rebuild with --features cuda"),
            "{device}"
        );
    }
    let out = blobflow(&["run", net.to_str().unwrap(), "--device", "gpu"]);
    assert!(
        text(&out.stderr).contains("expected cpu, cuda or cuda:N"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn time_prints_each_layer_and_the_totals() {
    let out = blobflow(&[
        "time",
        mtcnn("det2.prototxt").to_str().unwrap(),
        "--iterations",
        "2",
        "--batch",
        "4",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for want in [
        "input data: zeros, 4 3 24 24",
        "conv1",
        "prelu4",
        "Average Forward pass: ",
        "Average Backward pass: ",
        " images/s at batch 4",
        // R-Net's multiply-adds per image: conv1 28 x 27 x 22 x 22, conv2
        // 48 x 252 x 9 x 9, conv3 64 x 192 x 3 x 3, conv4 576 x 128,
        // conv5-1 128 x 2, conv5-2 128 x 4; four images, twice.
        "Forward: 0.012246 GFLOP a pass",
        "of this machine's multiply-add peak, measured now: ",
    ] {
        assert!(stdout.contains(want), "{want} in\n{stdout}");
    }
    assert!(!stdout.contains("memory: "), "{stdout}");
    let reusing = blobflow(&[
        "time",
        mtcnn("det2.prototxt").to_str().unwrap(),
        "--iterations",
        "2",
        "--reuse-memory",
    ]);
    assert!(reusing.status.success(), "{}", text(&reusing.stderr));
    let stdout = text(&reusing.stdout);
    assert!(
        stdout.contains("intermediate blobs share") && stdout.contains("Average Forward pass: "),
        "{stdout}"
    );
}

/// `caffe time -phase TRAIN`: a training net's layers timed forward and
/// backward, its batch-statistics BatchNorm and its Scale unfolded.
#[test]
fn time_in_the_train_phase_times_a_training_iteration() {
    let dir = std::env::temp_dir().join(format!("blobflow-time-train-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let net = dir.join("train.prototxt");
    std::fs::write(
        &net,
        r#"input: "data" input_shape { dim: 8 dim: 3 dim: 16 dim: 16 }
           input: "label" input_shape { dim: 8 }
           layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
                   convolution_param { num_output: 8 kernel_size: 3 weight_filler { type: "msra" } } }
           layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
           layer { name: "scale" type: "Scale" bottom: "conv" top: "conv" scale_param { bias_term: true } }
           layer { name: "dw" type: "Convolution" bottom: "conv" top: "dw"
                   convolution_param { num_output: 8 group: 8 kernel_size: 3 stride: 2 pad: 1 } }
           layer { name: "ip" type: "InnerProduct" bottom: "dw" top: "ip" inner_product_param { num_output: 4 } }
           layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }"#,
    )
    .unwrap();
    let out = blobflow(&[
        "time",
        net.to_str().unwrap(),
        "--iterations",
        "2",
        "--phase",
        "train",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("phase: TRAIN"), "{stdout}");
    assert!(stdout.contains(" images/s at batch 8"), "{stdout}");
    for layer in ["bn", "scale"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{layer} ")))
            .unwrap_or_else(|| panic!("{layer} in\n{stdout}"));
        assert!(!row.contains("folded"), "{row}");
    }
    let test = blobflow(&["time", net.to_str().unwrap(), "--iterations", "2"]);
    assert!(
        !text(&test.stdout).contains("phase: TRAIN"),
        "{}",
        text(&test.stdout)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_net_declaring_more_than_the_memory_limit_is_refused_with_its_layer() {
    let dir = std::env::temp_dir().join(format!("blobflow-limit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let net = dir.join("wide.prototxt");
    // 200 bytes declaring 400 MB of weights.
    std::fs::write(
        &net,
        r#"input: "x" input_shape { dim: 1 dim: 1000 }
           layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
                   inner_product_param { num_output: 100000 } }"#,
    )
    .unwrap();
    let out = blobflow(&["run", net.to_str().unwrap(), "--memory-limit", "64M"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("layer 'ip' (InnerProduct): "), "{err}");
    assert!(err.contains("above the limit of 64.0 MiB"), "{err}");
    let out = blobflow(&["run", net.to_str().unwrap(), "--memory-limit", "64Q"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown unit 'Q'"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A scratch folder of this test's own.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blobflow-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Outputs `a/b` and `a_b` once both went to `a_b.npy`: one was lost.
#[test]
fn outputs_whose_names_map_to_one_file_each_keep_their_own() {
    let dir = scratch("collide");
    let net = dir.join("net.prototxt");
    std::fs::write(
        &net,
        "input: 'x' input_shape { dim: 2 } \
         layer { name: 'p' type: 'Power' bottom: 'x' top: 'a/b' power_param { shift: 1 } } \
         layer { name: 'q' type: 'Power' bottom: 'x' top: 'a_b' power_param { shift: 2 } }",
    )
    .unwrap();
    let out = dir.join("out");
    let run = blobflow(&["run", net.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let stdout = text(&run.stdout);
    assert!(
        stdout.contains("a_b.npy") && stdout.contains("a_b~2.npy"),
        "{stdout}"
    );
    let first: Blob<f32> = npy::read(out.join("a_b.npy")).unwrap();
    let second: Blob<f32> = npy::read(out.join("a_b~2.npy")).unwrap();
    assert_eq!(first.to_vec().unwrap(), [1.0, 1.0], "a/b: 0 + 1");
    assert_eq!(second.to_vec().unwrap(), [2.0, 2.0], "a_b: 0 + 2");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_input_given_twice_is_refused() {
    let input = mtcnn("det1_60x80_input.npy");
    let arg = format!("data={}", input.display());
    let out = blobflow(&[
        "run",
        mtcnn("det1.prototxt").to_str().unwrap(),
        "--input",
        &arg,
        "--input",
        &arg,
    ]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--input data is given twice"), "{stderr}");
}

/// The memory limit refuses a large `.npy` input with the sizes; that
/// it does so before reading the data is `blob-runtime`'s
/// `tests/npy_memory.rs`.
#[test]
fn the_memory_limit_refuses_a_large_input() {
    let dir = scratch("npy-limit");
    let big = dir.join("big.npy");
    npy::write(&big, &Blob::<f32>::new(&[1, 3, 1024, 2731]).unwrap()).unwrap();
    let out = blobflow(&[
        "--memory-limit",
        "4M",
        "run",
        mtcnn("det1.prototxt").to_str().unwrap(),
        "--input",
        &format!("data={}", big.display()),
    ]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("big.npy") && stderr.contains("above the limit"),
        "{stderr}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A name of any length from a prototxt is quoted cut short: a 1 MB
/// layer type, blob or layer name once gave a 1 MB error line.
#[test]
fn errors_quote_long_names_cut_short() {
    let dir = scratch("long-names");
    let long = "x".repeat(1 << 20);
    let nets = [
        format!(
            "input: 'data' input_shape {{ dim: 1 }} layer {{ name: 'l' type: '{long}' bottom: 'data' top: 'y' }}"
        ),
        format!(
            "input: 'data' input_shape {{ dim: 1 }} layer {{ name: 'l' type: 'ReLU' bottom: '{long}' top: 'y' }}"
        ),
        format!(
            "input: 'data' input_shape {{ dim: 1 }} layer {{ name: '{long}' type: 'Convolution' bottom: 'data' top: 'y' }}"
        ),
        format!(
            "input: '{long}' input_shape {{ dim: 1 }} input: '{long}' input_shape {{ dim: 1 }}"
        ),
    ];
    for (k, prototxt) in nets.iter().enumerate() {
        let net = dir.join(format!("net{k}.prototxt"));
        std::fs::write(&net, prototxt).unwrap();
        let out = blobflow(&["run", net.to_str().unwrap()]);
        assert!(!out.status.success());
        let stderr = text(&out.stderr);
        assert!(stderr.contains("xxx..."), "net {k}: {stderr}");
        assert!(
            stderr.len() < 2000,
            "net {k}: {} bytes of error",
            stderr.len()
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A prototxt whose input is a 1 x 1 placeholder its layers cannot take
/// (OpenPose's hand and MPI nets): run builds the net at the input
/// file's shape, not at the placeholder's.
#[test]
fn run_builds_the_net_at_the_input_files_shape() {
    let dir = scratch("placeholder");
    let net = dir.join("net.prototxt");
    std::fs::write(
        &net,
        "input: 'image' input_dim: 1 input_dim: 3 input_dim: 1 input_dim: 1 \
         layer { name: 'conv' type: 'Convolution' bottom: 'image' top: 'conv' \
                 convolution_param { num_output: 2 kernel_size: 3 } }",
    )
    .unwrap();
    let image = dir.join("image.npy");
    npy::write(&image, &Blob::<f32>::new(&[1, 3, 8, 8]).unwrap()).unwrap();
    let out = blobflow(&[
        "run",
        net.to_str().unwrap(),
        "--input",
        &format!("image={}", image.display()),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("output conv: 1 2 6 6 (72)"), "{stdout}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_fork_asked_for_by_name_builds_its_forms_of_caffes_layers() {
    // ChenYingpeng/caffe-yolov3's YOLOv3-tiny pools 13 x 13 with a 2 x 2
    // window at stride 1 and keeps 13 x 13; Caffe's pooling gives 12.
    let dir = std::env::temp_dir().join(format!("blobflow-fork-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let net = dir.join("tiny_pool.prototxt");
    std::fs::write(
        &net,
        "input: 'data' input_shape { dim: 1 dim: 2 dim: 13 dim: 13 }\n\
         layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p'\n\
                 pooling_param { pool: MAX kernel_size: 2 stride: 1 } }\n",
    )
    .unwrap();
    let net = net.to_str().unwrap();
    let caffe = blobflow(&["run", net]);
    assert!(caffe.status.success(), "{}", text(&caffe.stderr));
    assert!(
        text(&caffe.stdout).contains("output p: 1 2 12 12"),
        "{}",
        text(&caffe.stdout)
    );
    let fork = blobflow(&["run", net, "--fork", "caffe-yolov3"]);
    assert!(fork.status.success(), "{}", text(&fork.stderr));
    let stdout = text(&fork.stdout);
    assert!(
        stdout.contains("layers: caffe-yolov3's forms of Caffe's"),
        "{stdout}"
    );
    assert!(stdout.contains("output p: 1 2 13 13"), "{stdout}");
    let unknown = blobflow(&["time", net, "--fork", "caffe-ssd"]);
    assert!(!unknown.status.success());
    assert!(
        text(&unknown.stderr)
            .contains("no fork \"caffe-ssd\" has layers of its own here; known: caffe-yolov3"),
        "{}",
        text(&unknown.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}
