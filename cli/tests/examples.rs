//! Caffe's own MNIST examples as their users run them, from their
//! upstream prototxts (`tests/fixtures/caffe-examples`, BVLC/caffe's
//! `examples/`): the autoencoder (test stages, a layer name used twice,
//! SigmoidCrossEntropyLoss and a EuclideanLoss of weight 0) and the
//! siamese net (the V1 format, `data_param.scale`, LevelDB as the default
//! backend, parameters shared by name, ContrastiveLoss). Stores are made
//! here from the shipped digits; only the solvers' test and display
//! counts are cut so a debug build runs them in seconds.

use std::path::{Path, PathBuf};
use std::process::Command;

use blobflow::data::Backend;

mod stores;
use stores::{digit_datum, digits, store};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A Caffe root: `examples/...` as the solvers name it.
fn caffe_root(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blobflow-examples-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("examples/mnist")).unwrap();
    std::fs::create_dir_all(dir.join("examples/siamese")).unwrap();
    dir
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(root().join("tests/fixtures/caffe-examples").join(name)).unwrap()
}

/// `blobflow train` in `dir`; returns the log's messages.
fn train(dir: &Path, args: &[&str]) -> Vec<String> {
    let run = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .current_dir(dir)
        .arg("train")
        .args(args)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{log}");
    log.lines()
        .map(|l| l.split_once("] ").expect("a glog line").1.to_string())
        .collect()
}

/// The `Iteration N, loss = X` values, in order.
fn losses(lines: &[String]) -> Vec<f64> {
    lines
        .iter()
        .filter(|l| l.starts_with("Iteration ") && l.contains(", loss = "))
        .map(|l| l.rsplit_once(" = ").unwrap().1.parse().unwrap())
        .collect()
}

#[test]
fn the_mnist_autoencoder_trains_from_its_own_prototxt() {
    let dir = caffe_root("autoencoder");
    let digits = digits();
    let datum = |i: usize| digit_datum(&digits, i);
    let mnist = dir.join("examples/mnist");
    store(
        &mnist.join("mnist_train_lmdb"),
        Backend::Lmdb,
        (0..2000).map(datum),
    );
    store(
        &mnist.join("mnist_test_lmdb"),
        Backend::Lmdb,
        (8000..8500).map(datum),
    );
    std::fs::write(
        mnist.join("mnist_autoencoder.prototxt"),
        fixture("mnist_autoencoder.prototxt"),
    )
    .unwrap();
    let solver = fixture("mnist_autoencoder_solver.prototxt")
        .replace("test_iter: 500", "test_iter: 2")
        .replace("test_iter: 100", "test_iter: 2")
        .replace("test_interval: 500", "test_interval: 10")
        .replace("display: 100", "display: 1");
    std::fs::write(mnist.join("solver.prototxt"), solver).unwrap();
    let lines = train(
        &dir,
        &[
            "--solver",
            "examples/mnist/solver.prototxt",
            "--iterations",
            "20",
        ],
    );
    // The solver says solver_mode: GPU: GPU 0 where there is one, else
    // the CPU with a word.
    assert!(
        lines.contains(&"Use GPU with device ID 0".to_string())
            || lines.iter().any(|l| l.starts_with(
                "The solver's solver_mode is GPU, but there is no GPU here for this build: running on the CPU"
            )),
        "{lines:#?}"
    );
    // Both test nets, each with its stage's data layer (the train store,
    // read by two nets at once, and the test store).
    for k in 0..2 {
        assert!(
            lines.contains(&format!("Iteration 10, Testing net (#{k})")),
            "{lines:#?}"
        );
    }
    let l2 = lines
        .iter()
        .find(|l| l.starts_with("    Test net output #1: l2_error = "))
        .unwrap();
    assert!(!l2.contains("(*"), "loss_weight 0 is no loss: {l2}");
    let losses = losses(&lines);
    assert_eq!(losses.len(), 21, "20 iterations and the final pass");
    // From about 940 (saturated sigmoids) to under 300 in 20 iterations
    // on Caffe's recipe, as Caffe's own run goes (see docs/BENCHMARKS.md).
    assert!(losses[0] > 800.0 && losses[20] < 300.0, "{losses:?}");
    assert!(lines.contains(&"Snapshotting to binary proto file examples/mnist/mnist_autoencoder_iter_20.caffemodel".to_string()));
    // caffe test on a stage, Caffe's single-dash flags.
    let run = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .current_dir(&dir)
        .args([
            "test",
            "-model",
            "examples/mnist/mnist_autoencoder.prototxt",
            "-weights",
            "examples/mnist/mnist_autoencoder_iter_20.caffemodel",
            "-iterations",
            "2",
            "-stage",
            "test-on-test",
        ])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{log}");
    assert!(
        log.contains("] l2_error = ") && log.contains("] cross_entropy_loss = "),
        "{log}"
    );
    let err = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .current_dir(&dir)
        .args([
            "test",
            "--model",
            "examples/mnist/mnist_autoencoder.prototxt",
            "--iterations",
            "1",
        ])
        .output()
        .unwrap();
    // With no stage no data layer is included: "data" has no producer,
    // and the error says which layer's rules left it out.
    assert!(!err.status.success());
    let message = String::from_utf8_lossy(&err.stderr);
    assert!(
        message.contains("Unknown bottom blob 'data'")
            && message.contains("layer 'data' (Data) makes it but its include/exclude rules leave it out of this net (TEST, level 0, no stages)"),
        "{message}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_mnist_siamese_net_trains_from_its_v1_prototxt_on_leveldb_pairs() {
    let dir = caffe_root("siamese");
    let digits = digits();
    // Caffe's convert_mnist_siamese_data: two digits a record, label 1
    // where they are the same digit; pairs picked by a fixed rule here.
    let pair = |k: usize, n: usize, first: usize| {
        let (i, j) = (first + k % n, first + (k * 7919 + 13) % n);
        let mut data = digits.image(i).to_vec();
        data.extend_from_slice(digits.image(j));
        blobflow::proto::Datum {
            channels: Some(2),
            height: Some(28),
            width: Some(28),
            data: Some(data),
            label: Some(i32::from(digits.labels[i] == digits.labels[j])),
            ..Default::default()
        }
    };
    let siamese = dir.join("examples/siamese");
    store(
        &siamese.join("mnist_siamese_train_leveldb"),
        Backend::LevelDb,
        (0..2000).map(|k| pair(k, 2000, 0)),
    );
    store(
        &siamese.join("mnist_siamese_test_leveldb"),
        Backend::LevelDb,
        (0..500).map(|k| pair(k, 500, 8000)),
    );
    std::fs::write(
        siamese.join("mnist_siamese_train_test.prototxt"),
        fixture("mnist_siamese_train_test.prototxt"),
    )
    .unwrap();
    let solver = fixture("mnist_siamese_solver.prototxt")
        .replace("test_iter: 100", "test_iter: 2")
        .replace("test_interval: 500", "test_interval: 15")
        .replace("display: 100", "display: 1");
    std::fs::write(siamese.join("solver.prototxt"), solver).unwrap();
    let lines = train(
        &dir,
        &[
            "--solver",
            "examples/siamese/solver.prototxt",
            "--iterations",
            "30",
        ],
    );
    assert!(
        lines.contains(&"Iteration 15, Testing net (#0)".to_string()),
        "{lines:#?}"
    );
    let losses = losses(&lines);
    assert_eq!(losses.len(), 31);
    let mean =
        |r: std::ops::Range<usize>| r.clone().map(|i| losses[i]).sum::<f64>() / r.len() as f64;
    assert!(
        mean(25..30) < 0.8 * mean(0..5),
        "the contrastive loss falls: {losses:?}"
    );
    // Its snapshot resumes, the shared parameters saved once each.
    let model = siamese.join("mnist_siamese_iter_30.caffemodel");
    let saved = blobflow::CaffeModel::open(&model).unwrap();
    assert_eq!(saved.layer_blobs::<f32>("conv1").unwrap().len(), 2);
    let lines = train(
        &dir,
        &[
            "--solver",
            "examples/siamese/solver.prototxt",
            "--snapshot",
            "examples/siamese/mnist_siamese_iter_30.solverstate",
            "--iterations",
            "32",
        ],
    );
    assert!(
        lines.iter().any(|l| l.starts_with("Iteration 30, loss = ")),
        "{lines:#?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `blobflow TOOL FROM TO` (an upgrade tool), which must succeed; its log.
fn upgrade(tool: &str, from: &Path, to: &Path) -> String {
    let run = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .arg(tool)
        .args([from, to])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{log}");
    log
}

/// `upgrade-net-proto-text` rewrites the V1 siamese net in today's
/// format (Caffe's own tool writes these bytes: checked by hand against
/// the Caffe built by scripts/caffe_peer.py, 2026-11-28); the net it
/// writes reads back to the same layers, and a file already of today's
/// format is said to be so.
#[test]
fn upgrading_the_v1_siamese_net_gives_todays_format() {
    let dir = caffe_root("upgrade");
    let old = dir.join("v1.prototxt");
    std::fs::write(&old, fixture("mnist_siamese_train_test.prototxt")).unwrap();
    let new = dir.join("new.prototxt");
    let log = upgrade("upgrade_net_proto_text", &old, &new);
    assert!(
        log.contains("] Successfully upgraded file specified using deprecated fields"),
        "{log}"
    );
    let text = std::fs::read_to_string(&new).unwrap();
    assert!(
        text.starts_with(
            "name: \"mnist_siamese_train_test\"\nlayer {\n  name: \"pair_data\"\n  type: \"Data\"\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("layers {") && !text.contains("blobs_lr"),
        "{text}"
    );
    assert!(
        text.contains("  transform_param {\n    scale: 0.00390625\n  }\n"),
        "{text}"
    );
    assert!(
        text.contains("  param {\n    name: \"conv1_w\"\n    lr_mult: 1\n  }\n"),
        "{text}"
    );
    let again = dir.join("again.prototxt");
    let log = upgrade("upgrade-net-proto-text", &new, &again);
    assert!(
        log.contains("] File already in latest proto format"),
        "{log}"
    );
    assert_eq!(std::fs::read_to_string(&again).unwrap(), text);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `upgrade-net-proto-binary` writes what protobuf's C++ writes: a
/// `.caffemodel` Caffe wrote in today's format comes back byte for byte,
/// and the V1 LeNet upgraded holds the same weights.
#[test]
fn binary_upgrades_write_caffes_bytes() {
    let dir = caffe_root("upgrade-binary");
    let new_format = root().join("tests/fixtures/lenet/lenet_iter_10000.caffemodel");
    let out = dir.join("same.caffemodel");
    let log = upgrade("upgrade-net-proto-binary", &new_format, &out);
    assert!(
        log.contains("] File already in latest proto format"),
        "{log}"
    );
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&new_format).unwrap());
    let v1 = root().join("tests/fixtures/lenet_v1/lenet_iter_10000.caffemodel");
    let upgraded = dir.join("v1_upgraded.caffemodel");
    upgrade("upgrade-net-proto-binary", &v1, &upgraded);
    let (a, b) = (
        blobflow::CaffeModel::open(&v1).unwrap(),
        blobflow::CaffeModel::open(&upgraded).unwrap(),
    );
    for layer in ["conv1", "conv2", "ip1", "ip2"] {
        let (x, y) = (
            a.layer_blobs::<f32>(layer).unwrap(),
            b.layer_blobs::<f32>(layer).unwrap(),
        );
        for (x, y) in x.iter().zip(&y) {
            assert_eq!(x.to_vec().unwrap(), y.to_vec().unwrap(), "{layer}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `upgrade-solver-proto-text` names the solver by today's `type` (the
/// file Caffe's tool writes: checked by hand against the Caffe built by
/// scripts/caffe_peer.py on four solvers, 2026-11-28), and the file it
/// writes trains as the old one names it.
#[test]
fn upgrading_a_solver_names_its_type() {
    let dir = caffe_root("upgrade-solver");
    let old = dir.join("old.prototxt");
    let text = fixture("mnist_siamese_solver.prototxt")
        .replace("solver_mode: GPU", "solver_mode: GPU\nsolver_type: ADAGRAD");
    std::fs::write(&old, text).unwrap();
    let new = dir.join("new.prototxt");
    let log = upgrade("upgrade_solver_proto_text", &old, &new);
    assert!(
        log.contains("] Successfully upgraded file specified using deprecated solver_type"),
        "{log}"
    );
    let written = std::fs::read_to_string(&new).unwrap();
    assert!(
        written.contains("type: \"AdaGrad\"\n") && !written.contains("solver_type"),
        "{written}"
    );
    // Caffe's order (by field number): test_iter (3) before base_lr (5).
    assert!(written.find("test_iter").unwrap() < written.find("base_lr").unwrap());
    let solver = blobflow::layers::solver::SolverFile::<f32>::open(&new).unwrap();
    assert!(matches!(
        solver.solver.solver_type,
        blobflow::layers::solver::SolverType::AdaGrad { .. }
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}
