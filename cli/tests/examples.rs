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
