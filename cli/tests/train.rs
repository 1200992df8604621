//! `blobflow train` and `blobflow test` as a Caffe user runs them: Caffe's
//! own LeNet solver and `train_val` prototxt, its `Data` layers reading
//! LMDBs of Caffe's `Datum` records, resumed from the snapshot real Caffe
//! wrote (`tests/fixtures/caffe-lenet-train`), with Caffe's log lines.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use blobflow::CaffeModel;
use blobflow::data::{Backend, StoreWriter};

mod stores;
use prost::Message;
use stores::{digit_datum, digits};

/// The repository's root: on a GPU machine the GPU case runs from a
/// bundle (scripts/gpu-check.sh) that holds its data under BLOBFLOW_ROOT.
fn root() -> PathBuf {
    std::env::var_os("BLOBFLOW_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

#[path = "../../tests/support/caffe_lenet_run.rs"]
mod caffe_lenet_run;

fn fixture() -> PathBuf {
    caffe_lenet_run::fixture(&root())
}

/// A fresh folder holding the fixture's files and the two LMDBs its
/// prototxt reads, written as the fixture's `make_lmdb.py` writes them
/// (digits 0..8000 to train, 8000..10000 to test, keys `%08d`).
fn caffe_folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blobflow-train-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    let digits = digits();
    stores::store(
        &dir.join("mnist_train_lmdb"),
        Backend::Lmdb,
        (0..8000).map(|i| digit_datum(&digits, i)),
    );
    stores::store(
        &dir.join("mnist_test_lmdb"),
        Backend::Lmdb,
        (8000..10000).map(|i| digit_datum(&digits, i)),
    );
    dir
}

/// The `blobflow` binary: cargo's, or the bundle's (BLOBFLOW_BIN) on a
/// GPU machine.
fn blobflow_bin() -> PathBuf {
    std::env::var_os("BLOBFLOW_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_blobflow").into())
}

fn blobflow(dir: &Path, args: &[&str]) -> Output {
    Command::new(blobflow_bin())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

/// Runs `blobflow ARGS` in `dir`, which must succeed, and returns its
/// log's messages.
fn blobflow_ok(dir: &Path, args: &[&str]) -> Vec<String> {
    let run = blobflow(dir, args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    messages(&run.stderr)
}

/// The message of each glog line (`I1128 11:40:00.123456 42 solver] ...`).
fn messages(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.splitn(4, ' ').collect();
            assert!(
                fields.len() == 4 && fields[0].starts_with('I') && fields[0].len() == 5,
                "not a glog line: {line:?}"
            );
            let (_, message) = fields[3].split_once("] ").expect("glog's '] '");
            message.to_string()
        })
        .collect()
}

/// The number after `key` in `line`, as Caffe's log parsers take it.
fn after(line: &str, key: &str) -> Option<f64> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.split_whitespace()
        .next()?
        .trim_end_matches(',')
        .parse()
        .ok()
}

/// Each `Iteration N, loss = L` line's `(N, L)`, as Caffe's log parsers
/// read them.
fn printed_losses(lines: &[String]) -> Vec<(usize, f64)> {
    lines
        .iter()
        .filter(|l| l.starts_with("Iteration ") && l.contains(", loss = "))
        .map(|l| {
            (
                after(l, "Iteration ").unwrap() as usize,
                after(l, "loss = ").unwrap(),
            )
        })
        .collect()
}

/// `blobflow train` resuming Caffe's snapshot in `dir`, with `more`.
fn resume_caffes_snapshot(dir: &Path, more: &[&str]) -> Output {
    let mut args = vec![
        "train",
        "--solver",
        "lenet_solver.prototxt",
        "--snapshot",
        "lenet_iter_1000.solverstate",
    ];
    args.extend_from_slice(more);
    blobflow(dir, &args)
}

#[test]
fn train_resumes_caffes_snapshot_from_lmdb_and_retraces_caffes_log_and_weights() {
    let dir = caffe_folder("resume");
    let run = resume_caffes_snapshot(&dir, &[]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let lines = messages(&run.stderr);
    // Caffe's lines, as tools/extra/parse_log.py reads them.
    let losses = printed_losses(&lines);
    let caffe = caffe_lenet_run::caffe_losses(&root());
    // Each iteration's, then the extra pass's at 1020 as Caffe prints it.
    assert_eq!(losses.len(), 21, "{lines:#?}");
    assert_eq!(losses[20].0, 1020);
    // Within 1e-4, as the issue asks: the summation orders differ from
    // OpenBLAS's (measured worst 1.0e-5 on the AVX2 path, whose 8-lane
    // dot products add in another order than AVX-512's; below on
    // AVX-512).
    for ((iter, ours), (caffe_iter, theirs)) in losses.iter().zip(&caffe) {
        assert_eq!(iter, caffe_iter);
        assert!(
            (ours - f64::from(*theirs)).abs() <= 1e-4 * f64::from(theirs.abs()),
            "iteration {iter}: loss {ours} here, {theirs} in Caffe's log"
        );
    }
    let lr_lines = lines.iter().filter(|l| l.contains(", lr = ")).count();
    assert_eq!(lr_lines, 20);
    let test_at = lines
        .iter()
        .position(|l| l == "Iteration 1000, Testing net (#0)")
        .expect("a test at iteration 1000");
    let accuracy = after(&lines[test_at + 1], "Test net output #0: accuracy = ").unwrap();
    assert!(accuracy > 0.95, "accuracy {accuracy}");
    assert!(lines[test_at + 2].starts_with("    Test net output #1: loss = "));
    assert!(
        lines[test_at + 2].ends_with(" loss)"),
        "{}",
        lines[test_at + 2]
    );
    assert_eq!(lines.last().unwrap(), "Optimization Done.");
    assert!(lines.contains(&"Snapshotting to binary proto file lenet_iter_1020.caffemodel".into()));

    // The weights Caffe had at 1020, within rounding of the sums' order.
    caffe_lenet_run::assert_caffes_weights_at_1020(
        &root(),
        &CaffeModel::open(dir.join("lenet_iter_1020.caffemodel")).unwrap(),
    );

    // caffe test on the weights just written: 20 batches of the test LMDB.
    let lines = blobflow_ok(
        &dir,
        &[
            "test",
            "--model",
            "lenet_train_test.prototxt",
            "--weights",
            "lenet_iter_1020.caffemodel",
            "--iterations",
            "20",
        ],
    );
    assert_eq!(lines[0], "Running for 20 iterations.");
    let batches: Vec<f64> = lines
        .iter()
        .filter(|l| l.starts_with("Batch ") && l.contains(", accuracy = "))
        .map(|l| after(l, "accuracy = ").unwrap())
        .collect();
    assert_eq!(batches.len(), 20);
    let mean = lines
        .iter()
        .find_map(|l| l.strip_prefix("accuracy = "))
        .unwrap()
        .parse::<f64>()
        .unwrap();
    let want = batches.iter().sum::<f64>() / 20.0;
    assert!(
        (mean - want).abs() < 1e-5,
        "{mean} vs the batches' mean {want}"
    );
    assert!(mean > 0.95);
    let loss = lines.iter().find(|l| l.starts_with("loss = ")).unwrap();
    assert!(loss.ends_with(" loss)"), "{loss}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_snapshots_and_stops_and_the_snapshot_resumes() {
    let dir = caffe_folder("sigint");
    let mut child = Command::new(blobflow_bin())
        .current_dir(&dir)
        .args([
            "train",
            "--solver",
            "lenet_solver.prototxt",
            "--iterations",
            "100000",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    use std::io::BufRead;
    let mut reader = std::io::BufReader::new(stderr);
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 {
        seen.push(line.clone());
        if line.contains("] Iteration 5, lr = ") {
            let killed = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(killed.success());
        }
        line.clear();
    }
    let status = child.wait().unwrap();
    let text = seen.concat();
    assert!(status.success(), "{text}");
    let lines = messages(text.as_bytes());
    assert!(lines.contains(&"Interrupted: SIGINT".into()), "{text}");
    assert_eq!(lines.last().unwrap(), "Optimization stopped early.");
    let snapshot = lines
        .iter()
        .find_map(|l| l.strip_prefix("Snapshotting solver state to binary proto file "))
        .expect("a snapshot at the stop");
    let iter: usize = snapshot
        .trim_end_matches(".solverstate")
        .rsplit('_')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((6..100_000).contains(&iter), "stopped at {iter}");
    // The snapshot resumes where the run stopped, asked in Caffe's own
    // single-dash flags.
    let lines = blobflow_ok(
        &dir,
        &[
            "train",
            "-solver",
            "lenet_solver.prototxt",
            &format!("-snapshot={snapshot}"),
            "-iterations",
            &(iter + 2).to_string(),
        ],
    );
    let first = lines
        .iter()
        .find(|l| l.contains(", loss = "))
        .expect("an iteration shown");
    assert!(
        first.starts_with(&format!("Iteration {iter}, loss = ")),
        "{first}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_record_stops_training_naming_the_store_and_the_key() {
    let dir = caffe_folder("bad");
    std::fs::remove_dir_all(dir.join("mnist_train_lmdb")).unwrap();
    let mut w = StoreWriter::create(dir.join("mnist_train_lmdb"), Backend::Lmdb).unwrap();
    let good = blobflow::proto::Datum {
        channels: Some(1),
        height: Some(28),
        width: Some(28),
        data: Some(vec![0; 784]),
        label: Some(3),
        ..Default::default()
    };
    for i in 0..100 {
        let mut d = good.clone();
        if i == 70 {
            d.data = Some(vec![0; 700]);
        }
        w.put(format!("{i:08}").as_bytes(), &d.encode_to_vec())
            .unwrap();
    }
    w.finish().unwrap();
    let run = blobflow(&dir, &["train", "--solver", "lenet_solver.prototxt"]);
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("mnist_train_lmdb, key \"00000070\": 1 x 28 x 28 = 784 values declared but 700 bytes of data stored"),
        "{err}"
    );
    // A missing store is named at set-up, with the layer.
    std::fs::remove_dir_all(dir.join("mnist_test_lmdb")).unwrap();
    let run = blobflow(&dir, &["train", "--solver", "lenet_solver.prototxt"]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("layer 'mnist' (Data)") && err.contains("mnist_test_lmdb: no such folder"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Caffe's `-gpu N` and `--device cuda:N` pick GPU N; a build without
/// CUDA says so rather than training on the CPU.
#[cfg(not(feature = "cuda"))]
#[test]
fn a_gpu_asked_for_by_number_is_a_gpu_or_an_error() {
    let dir = caffe_folder("gpu_number");
    for flags in [["-gpu", "1"], ["--device", "cuda:1"]] {
        let mut args = vec!["train", "-solver", "lenet_solver.prototxt"];
        args.extend(flags);
        let run = blobflow(&dir, &args);
        assert!(!run.status.success(), "{flags:?}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains("Use GPU with device ID 1"), "{flags:?}: {err}");
        assert!(
            err.contains("rebuild with --features cuda"),
            "{flags:?}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--device cuda` retraces Caffe's CPU run too, within what the GPU's
/// other summation orders allow (1e-4 of each loss). It runs where a CUDA
/// driver is: a GPU, or `scripts/cuda-on-cpu.sh`'s CPU driver, which sets
/// `BLOBFLOW_REQUIRE_GPU` so that a missing driver fails it there;
/// elsewhere it says why it did not run.
#[cfg(feature = "cuda")]
#[test]
fn train_on_the_gpu_retraces_caffes_losses() {
    let dir = caffe_folder("gpu");
    let run = resume_caffes_snapshot(&dir, &["--device", "cuda"]);
    let log = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() && std::env::var_os("BLOBFLOW_REQUIRE_GPU").is_none() {
        eprintln!("not run: no CUDA device here ({})", log.trim());
        return;
    }
    assert!(run.status.success(), "{log}");
    let lines = messages(&run.stderr);
    let caffe = caffe_lenet_run::caffe_losses(&root());
    let ours: Vec<f64> = lines
        .iter()
        .filter(|l| l.starts_with("Iteration ") && l.contains(", loss = "))
        .map(|l| after(l, "loss = ").unwrap())
        .collect();
    for (&(iter, theirs), ours) in caffe.iter().zip(&ours) {
        let theirs = f64::from(theirs);
        assert!(
            (ours - theirs).abs() <= 1e-4 * theirs.abs(),
            "iteration {iter}: {ours} on the GPU, {theirs} in Caffe"
        );
    }
    assert!(lines.iter().any(|l| l.starts_with("GPU 0: ")), "{lines:#?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh copy of `tests/fixtures/caffe-cifar-train`: cifar10_quick,
/// the LMDBs real Caffe's `convert_imageset` wrote, the mean its
/// `compute_image_mean` wrote, and its snapshot at iteration 100 (not
/// its weights at 110, which training here writes).
fn cifar_folder(name: &str) -> PathBuf {
    let fixture = cifar_fixture();
    let dir = std::env::temp_dir().join(format!("blobflow-cifar-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["", "cifar_train_lmdb", "cifar_test_lmdb"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for entry in std::fs::read_dir(fixture.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() && !path.ends_with("cifar10_quick_iter_110.caffemodel") {
                std::fs::copy(&path, dir.join(sub).join(path.file_name().unwrap())).unwrap();
            }
        }
    }
    dir
}

/// What Caffe printed, from one of the fixture's text files: each line's
/// words before its first number (or before ` = `) and that number.
fn caffe_printed(file: &str) -> Vec<(String, f64)> {
    std::fs::read_to_string(cifar_fixture().join(file))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| match l.split_once(" = ") {
            Some((key, rest)) => (key.to_string(), after(rest, "").unwrap()),
            None => {
                let (key, value) = l.split_once(' ').unwrap();
                (key.to_string(), value.parse().unwrap())
            }
        })
        .collect()
}

fn cifar_fixture() -> PathBuf {
    root().join("tests/fixtures/caffe-cifar-train")
}

#[test]
fn cifar10_quick_from_caffes_convert_imageset_lmdbs_retraces_caffes_training() {
    let dir = cifar_folder("resume");
    let lines = blobflow_ok(
        &dir,
        &[
            "train",
            "--solver",
            "cifar10_quick_solver.prototxt",
            "--snapshot",
            "cifar10_quick_iter_100.solverstate",
        ],
    );
    let losses = printed_losses(&lines);
    let caffe = caffe_printed("caffe_losses.txt");
    assert_eq!(caffe.len(), 10);
    assert_eq!(losses.len(), 11, "{lines:#?}");
    // Caffe's raw records (the training LMDB) and its mean, then 10
    // steps of a loss that moves between 1.5 and 1.8; within rounding
    // of the sums' order (the largest seen 6.4e-6).
    for ((iter, ours), (caffe_iter, theirs)) in losses.iter().zip(&caffe) {
        assert_eq!(iter.to_string(), *caffe_iter);
        assert!(
            (ours - theirs).abs() <= 2e-5 * theirs.abs(),
            "iteration {iter}: loss {ours} here, {theirs} in Caffe's log"
        );
    }
    let ours = CaffeModel::open(dir.join("cifar10_quick_iter_110.caffemodel")).unwrap();
    let caffes = cifar_fixture().join("cifar10_quick_iter_110.caffemodel");
    let theirs = CaffeModel::open(&caffes).unwrap();
    let start = CaffeModel::open(dir.join("cifar10_quick_iter_100.caffemodel")).unwrap();
    // Within a thousandth of how far the ten steps moved each blob (the
    // largest seen: 2.8e-4, conv1's weights, whose inputs are pixels
    // less the mean); a lost solver term moves ip1 by 3e-2 of it.
    for layer in ["conv1", "conv2", "conv3", "ip1", "ip2"] {
        let values = |model: &CaffeModel| -> Vec<Vec<f32>> {
            model
                .layer_blobs::<f32>(layer)
                .unwrap()
                .iter()
                .map(|b| b.to_vec().unwrap())
                .collect()
        };
        let largest = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max)
        };
        for ((a, b), s) in values(&ours)
            .iter()
            .zip(values(&theirs))
            .zip(values(&start))
        {
            let (worst, moved) = (largest(a, &b), largest(&b, &s));
            assert!(
                worst <= 1e-3 * moved,
                "{layer}: {worst:e} from Caffe's weights, which moved {moved:e} in 10 steps"
            );
        }
    }
    // caffe test on Caffe's own weights at 110 over the encoded (PNG)
    // test LMDB: the same accuracy and loss as Caffe printed.
    let lines = blobflow_ok(
        &dir,
        &[
            "test",
            "--model",
            "cifar10_quick_train_test.prototxt",
            "--weights",
            caffes.to_str().unwrap(),
            "--iterations",
            "1",
        ],
    );
    let printed = caffe_printed("caffe_test.txt");
    for (key, theirs) in printed {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key:?} line in {lines:#?}"));
        let ours = after(line, " = ").unwrap();
        assert!(
            (ours - theirs).abs() <= 1e-4 * theirs.abs().max(1.0),
            "{key}: {ours} here, {theirs} in Caffe's output"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A SegNet-style net as SegNet's users write one (its layers, not its
/// size): `DenseImageData` pairs mirrored and cropped alike, the `BN`
/// fork layer, max pooling's masks unpooled by `Upsample`, SegNet's
/// class-weighted `SoftmaxWithLoss` with the void class ignored, and
/// `Accuracy` with its per-class top.
const SEGNET_STYLE: &str = r#"name: "segnet_style"
layer { name: "data" type: "DenseImageData" top: "data" top: "label"
  dense_image_data_param { source: "pairs.txt" batch_size: 4 shuffle: true
                           mirror: true crop_height: 32 crop_width: 40 } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "conv1_bn" type: "BN" bottom: "conv1" top: "conv1"
  bn_param { scale_filler { type: "constant" value: 1 } shift_filler { type: "constant" value: 0.001 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" top: "pool1_mask"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "conv2_bn" type: "BN" bottom: "conv2" top: "conv2"
  bn_param { scale_filler { type: "constant" value: 1 } shift_filler { type: "constant" value: 0.001 } } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "upsample1" type: "Upsample" bottom: "conv2" bottom: "pool1_mask" top: "upsample1"
  upsample_param { scale: 2 } }
layer { name: "conv_classifier" type: "Convolution" bottom: "upsample1" top: "conv_classifier"
  convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "msra" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "conv_classifier" bottom: "label" top: "loss"
  loss_param: { weight_by_label_freqs: true ignore_label: 4
                class_weighting: 0.5 class_weighting: 1 class_weighting: 2 class_weighting: 4 } }
layer { name: "accuracy" type: "Accuracy" bottom: "conv_classifier" bottom: "label"
  top: "accuracy" top: "per_class_accuracy" }
"#;

#[test]
fn a_segnet_style_net_trains_on_image_and_label_pairs() {
    let dir = std::env::temp_dir().join(format!("blobflow-train-{}-segnet", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Blocks of four classes and the void class 4, each a colour of its
    // own with some noise: what a pixel's colour says, the net learns.
    let palette = [
        [200u8, 30, 30],
        [30, 200, 30],
        [30, 30, 200],
        [200, 200, 30],
        [0, 0, 0],
    ];
    let mut pairs = String::new();
    for i in 0..6u32 {
        let class = |x: u32, y: u32| ((x / 8 + y / 8 + i) % 5) as u8;
        image::GrayImage::from_fn(48, 40, |x, y| image::Luma([class(x, y)]))
            .save(dir.join(format!("label{i}.png")))
            .unwrap();
        image::RgbImage::from_fn(48, 40, |x, y| {
            let noise = ((x * 7 + y * 13 + i * 5) % 23) as u8;
            image::Rgb(palette[usize::from(class(x, y))].map(|v| v.saturating_add(noise)))
        })
        .save(dir.join(format!("image{i}.png")))
        .unwrap();
        pairs += &format!("image{i}.png label{i}.png\n");
    }
    std::fs::write(dir.join("pairs.txt"), pairs).unwrap();
    std::fs::write(dir.join("train.prototxt"), SEGNET_STYLE).unwrap();
    std::fs::write(
        dir.join("solver.prototxt"),
        "net: \"train.prototxt\" base_lr: 0.05 lr_policy: \"fixed\" momentum: 0.9 \
         weight_decay: 0.0005 display: 10 max_iter: 40 snapshot: 40 random_seed: 1701 \
         snapshot_prefix: \"segnet_style\" solver_mode: CPU\n",
    )
    .unwrap();
    let lines = blobflow_ok(&dir, &["train", "--solver", "solver.prototxt"]);
    let losses = printed_losses(&lines);
    assert_eq!(losses.len(), 5, "{lines:#?}");
    let (first, last) = (losses[0].1, losses[4].1);
    assert!(last < 0.6 * first, "loss {first} -> {last}: {losses:?}");
    let per_class = lines
        .iter()
        .filter(|l| l.contains("per_class_accuracy = "))
        .count();
    // Each class's line at iterations 0, 10, 20 and 30 (Caffe's last
    // line, at 40, gives the loss alone).
    assert_eq!(
        per_class,
        4 * 4,
        "a per-class line for each class each display"
    );
    let model = CaffeModel::open(dir.join("segnet_style_iter_40.caffemodel")).unwrap();
    assert_eq!(model.layer_blobs::<f32>("conv1_bn").unwrap().len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A copy of the LMDB at `from` (its data file; opening it makes the
/// lock file).
fn copy_store(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(from.join("data.mdb"), to.join("data.mdb")).unwrap();
}

/// SSD trained as its users train it, from VOC files to `caffe train`:
/// MobileNet-SSD's own training prototxt (its AnnotatedData with every
/// augmentation, MultiBoxLoss over 21 classes) and the five annotated
/// street photos of its repository (`tests/fixtures/nets/mobilenet_ssd`),
/// turned into an LMDB by `convert-annoset` as its `create_data.sh`
/// does, trained by `blobflow train` with its solver's settings, and
/// tested by its test net's DetectionEvaluate into a mean average
/// precision (its solver's `eval_type: "detection"`).
/// MobileNet-SSD's five annotated street photos (VOC XML boxes) in a
/// fresh folder, turned into `trainval_lmdb` by `convert_annoset` as
/// SSD's `create_data.sh` does, and the same records as `test_lmdb`.
fn voc_folder(name: &str) -> PathBuf {
    let fixture = root().join("tests/fixtures/nets/mobilenet_ssd");
    let dir = std::env::temp_dir().join(format!("blobflow-train-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["Images", "Labels"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for entry in std::fs::read_dir(fixture.join("dataset").join(sub)).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.join(sub).join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::copy(
        fixture.join("dataset/labelmap.prototxt"),
        dir.join("labelmap.prototxt"),
    )
    .unwrap();
    let list: String = (1..=5)
        .map(|i| format!("Images/{i}.jpg Labels/{i}.xml\n"))
        .collect();
    std::fs::write(dir.join("trainval.txt"), list).unwrap();
    let lines = blobflow_ok(
        &dir,
        &[
            "convert_annoset",
            "--anno_type=detection",
            "--label_type=xml",
            "--label_map_file=labelmap.prototxt",
            "--check_label",
            "--encoded",
            "--encode_type=jpg",
            "./",
            "trainval.txt",
            "trainval_lmdb",
        ],
    );
    assert!(
        lines.iter().any(|l| l == "Processed 5 files."),
        "{lines:#?}"
    );
    copy_store(&dir.join("trainval_lmdb"), &dir.join("test_lmdb"));
    dir
}

#[test]
fn mobilenet_ssd_trains_from_its_own_voc_files() {
    let fixture = root().join("tests/fixtures/nets/mobilenet_ssd");
    let dir = voc_folder("ssd");
    // The same five images are its test set (test_lmdb), their sizes
    // listed as SSD's `create_list.sh` lists them.
    let lines = blobflow_ok(
        &dir,
        &["get_image_size", "./", "trainval.txt", "test_name_size.txt"],
    );
    assert!(
        lines.iter().any(|l| l == "A total of 5 images."),
        "{lines:#?}"
    );
    let sizes = std::fs::read_to_string(dir.join("test_name_size.txt")).unwrap();
    assert_eq!(
        sizes,
        "1 500 500\n2 500 500\n3 500 500\n4 500 500\n5 500 500\n"
    );
    // The net has 21 classes, its label map 6: results are saved under
    // 21 names.
    let mut labels21 = std::fs::read_to_string(dir.join("labelmap.prototxt")).unwrap();
    for c in 6..21 {
        labels21.push_str(&format!("item {{ name: \"class{c}\" label: {c} }}\n"));
    }
    std::fs::write(dir.join("labelmap21.prototxt"), labels21).unwrap();
    // Its batches of 24 and 8 cut to 2, to keep the test short; the test
    // net evaluates in pixels and saves its detections as SSD's
    // `ssd_pascal.py` has it do.
    for (net, batch) in [("train", 24), ("test", 8)] {
        let text = std::fs::read_to_string(fixture.join(format!("MobileNetSSD_{net}.prototxt")))
            .unwrap()
            .replace(&format!("batch_size: {batch}"), "batch_size: 2")
            .replace(
                "    evaluate_difficult_gt: false\n",
                "    evaluate_difficult_gt: false\n    name_size_file: \"test_name_size.txt\"\n",
            )
            .replace(
                "    confidence_threshold: 0.01\n",
                "    confidence_threshold: 0.01\n    save_output_param { output_directory: \"results\" \
                 output_name_prefix: \"comp4_det_test_\" output_format: \"VOC\" \
                 label_map_file: \"labelmap21.prototxt\" name_size_file: \"test_name_size.txt\" \
                 num_test_image: 2 }\n",
            );
        std::fs::write(dir.join(format!("{net}.prototxt")), text).unwrap();
    }
    // voc/solver.prototxt's settings, tested every 3 iterations over 1
    // batch, for 3 iterations.
    std::fs::write(
        dir.join("solver.prototxt"),
        "train_net: \"train.prototxt\" test_net: \"test.prototxt\" test_iter: 1 \
         test_interval: 3 base_lr: 0.0005 display: 1 max_iter: 3 lr_policy: \"multistep\" \
         gamma: 0.5 weight_decay: 0.00005 snapshot: 0 snapshot_prefix: \"snapshot/mobilenet\" \
         solver_mode: CPU debug_info: false snapshot_after_train: false test_initialization: false \
         average_loss: 1 stepvalue: 20000 stepvalue: 40000 iter_size: 1 type: \"RMSProp\" \
         eval_type: \"detection\" ap_version: \"11point\" show_per_class_result: true \
         random_seed: 1701\n",
    )
    .unwrap();
    let lines = blobflow_ok(&dir, &["train", "--solver", "solver.prototxt"]);
    let map: Vec<f64> = lines
        .iter()
        .filter_map(|l| after(l, "Test net output #0: detection_eval = "))
        .collect();
    assert_eq!(map.len(), 1, "{lines:#?}");
    assert!((0.0..=1.0).contains(&map[0]), "{map:?}");
    assert!(
        lines.iter().any(|l| l.starts_with("class1: ")),
        "the cars' average precision: {lines:#?}"
    );
    // VOC's result files: `image score xmin ymin xmax ymax` in pixels.
    let cars = std::fs::read_to_string(dir.join("results/comp4_det_test_car.txt")).unwrap();
    assert!(!cars.is_empty(), "a car or more among 400 boxes");
    for line in cars.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words.len(), 6, "{line}");
        assert!(words[0] == "1" || words[0] == "2", "{line}");
        let score: f32 = words[1].parse().unwrap();
        assert!((0.01..=1.0).contains(&score), "{line}");
        for corner in &words[2..] {
            let v: i64 = corner.parse().unwrap();
            assert!((0..=500).contains(&v), "{line}");
        }
    }
    assert_eq!(std::fs::read_dir(dir.join("results")).unwrap().count(), 20);
    let losses = printed_losses(&lines);
    assert_eq!(losses.len(), 4, "{lines:#?}");
    assert!(
        losses.iter().all(|&(_, l)| l.is_finite() && l > 0.0),
        "{losses:?}"
    );
    assert!(
        lines.iter().any(|l| l
            .trim_start()
            .starts_with("Train net output #0: mbox_loss = ")),
        "{lines:#?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `text` with each `(from, to)` of `edits` made, each `from` found.
fn edited(mut text: String, edits: &[(&str, &str)]) -> String {
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replace(from, to);
    }
    text
}

/// A YOLO fork's VOC training set-up (eric612/MobileNet-YOLO,
/// `tests/fixtures/nets/yolo/PREFIX_{train,test,solver}.prototxt`) on the
/// five annotated photos: its batches of `batches` (train, test) cut to
/// 2, its solver's `edits` made (the test's own iterations, paths, CPU),
/// trained by `blobflow train` and tested by its test net's detection
/// output and DetectionEvaluate. Returns the log.
fn train_yolo_set_up(prefix: &str, batches: (usize, usize), edits: &[(&str, &str)]) -> Vec<String> {
    let fixture = root().join("tests/fixtures/nets/yolo");
    let dir = voc_folder(prefix);
    let mut labels = std::fs::read_to_string(dir.join("labelmap.prototxt")).unwrap();
    for c in 6..21 {
        labels.push_str(&format!("item {{ name: \"class{c}\" label: {c} }}\n"));
    }
    std::fs::write(dir.join("labelmap_voc.prototxt"), labels).unwrap();
    for (net, batch, store) in [
        ("train", batches.0, "trainval"),
        ("test", batches.1, "test"),
    ] {
        let text = std::fs::read_to_string(fixture.join(format!("{prefix}_{net}.prototxt")))
            .unwrap()
            .replace(&format!("batch_size: {batch}"), "batch_size: 2")
            .replace(
                &format!("examples/VOC0712/VOC0712_{store}_lmdb"),
                &format!("{store}_lmdb"),
            )
            .replace(
                "data/VOC0712/labelmap_voc.prototxt",
                "labelmap_voc.prototxt",
            );
        assert!(text.contains(&format!("source: \"{store}_lmdb\"")));
        assert!(text.contains("batch_size: 2"));
        std::fs::write(dir.join(format!("{net}.prototxt")), text).unwrap();
    }
    let solver =
        std::fs::read_to_string(fixture.join(format!("{prefix}_solver.prototxt"))).unwrap();
    std::fs::write(dir.join("solver.prototxt"), edited(solver, edits)).unwrap();
    let lines = blobflow_ok(&dir, &["train", "--solver", "solver.prototxt"]);
    let map: Vec<f64> = lines
        .iter()
        .filter_map(|l| after(l, "Test net output #0: detection_eval = "))
        .collect();
    assert_eq!(map.len(), 1, "{lines:#?}");
    assert!((0.0..=1.0).contains(&map[0]), "{map:?}");
    std::fs::remove_dir_all(&dir).unwrap();
    lines
}

/// YOLOv3 trained as the YOLO fork's users train it: MobileNet-YOLOv3
/// lite's own VOC training set-up (`models/mobilenetv1_voc`:
/// AnnotatedData in YOLO's label layout with its five scales, jitter,
/// distortion and expansion; the `Yolov3` loss at two scales; its
/// solver's `multifixed` warm-up and `iter_size: 2`), tested by
/// `Yolov3DetectionOutput` and DetectionEvaluate into a mean average
/// precision.
#[test]
fn mobilenet_yolov3_trains_from_its_own_voc_set_up() {
    let prefix = "models/mobilenetv1_voc/mobilenet_yolov3_lite";
    let lines = train_yolo_set_up(
        "mobilenet_yolov3_lite",
        (16, 1),
        &[
            (&format!("{prefix}_train.prototxt"), "train.prototxt"),
            (&format!("{prefix}_test.prototxt"), "test.prototxt"),
            ("test_iter: 4952", "test_iter: 1"),
            ("test_interval: 1000", "test_interval: 2"),
            ("display: 10", "display: 1"),
            ("max_iter: 120000", "max_iter: 2"),
            ("snapshot: 1000", "snapshot: 0"),
            ("solver_mode: GPU", "solver_mode: CPU"),
            ("average_loss: 10", "average_loss: 1"),
            ("snapshot_after_train: true", "snapshot_after_train: false"),
        ],
    );
    // The warm-up's first stage: 1e-6 up to iteration 50.
    let rates: Vec<f64> = lines.iter().filter_map(|l| after(l, "lr = ")).collect();
    assert_eq!(rates, [1e-6; 2], "{lines:#?}");
    let losses = printed_losses(&lines);
    assert_eq!(losses.len(), 3, "{lines:#?}");
    assert!(
        losses.iter().all(|&(_, l)| l.is_finite() && l > 0.0),
        "{losses:?}"
    );
    for scale in ["det_loss1", "det_loss2"] {
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start().starts_with("Train net output #")
                    && l.contains(&format!("{scale} = "))),
            "{scale}: {lines:#?}"
        );
    }
}

/// YOLOv2 the same way: MobileNet-YOLO lite's own VOC set-up
/// (`models/yolov2`: AnnotatedData in YOLO's label layout with SSD's
/// batch samplers and ten scales from 320 to 608, RegionLoss over the
/// Reorg'd map; RMSProp), one iteration (its `iter_size` of 8 cut to
/// 1), tested by `YoloDetectionOutput` and DetectionEvaluate.
#[test]
fn mobilenet_yolo_v2_trains_from_its_own_voc_set_up() {
    let prefix = "models/yolov2/mobilenet_yolo_lite";
    let lines = train_yolo_set_up(
        "mobilenet_yolo_lite",
        (8, 1),
        &[
            (&format!("{prefix}_train.prototxt"), "train.prototxt"),
            (&format!("{prefix}_test.prototxt"), "test.prototxt"),
            ("test_iter: 4952", "test_iter: 1"),
            ("test_interval: 1000", "test_interval: 1"),
            ("display: 10", "display: 1"),
            ("max_iter: 120000", "max_iter: 1"),
            ("snapshot: 1000", "snapshot: 0"),
            ("solver_mode: GPU", "solver_mode: CPU"),
            ("average_loss: 10", "average_loss: 1"),
            ("iter_size: 8", "iter_size: 1"),
            ("snapshot_after_train: true", "snapshot_after_train: false"),
        ],
    );
    let losses = printed_losses(&lines);
    assert_eq!(losses.len(), 2, "{lines:#?}");
    assert!(
        losses.iter().all(|&(_, l)| l.is_finite() && l > 0.0),
        "{losses:?}"
    );
    assert!(
        lines.iter().any(|l| l
            .trim_start()
            .starts_with("Train net output #0: det_loss = ")),
        "{lines:#?}"
    );
}

/// The YOLO fork's detection-with-segmentation set-up
/// (`models/cityscapes`: MobileNet-YOLOv3 with a segmentation head
/// trained by `YoloSeg`, its pixel counts by two `Reduction`s, tested
/// by `SegmentationEvaluate` beside DetectionEvaluate under `eval_type:
/// "detection_segmentation"`) on the five photos, each with a label
/// image painted from its boxes (cars) and a road below, stored by
/// `convert_annoset --anno_type=detection_with_segmentation` as the
/// fork's `create_data.sh` stores cityscapes. The fork's train net gives
/// its segmentation head 19 planes where its label map and test net
/// have 3; the test makes it 3 (the fork refuses the pair as it is).
#[test]
fn mobilenet_yolov3_trains_detection_with_segmentation_from_its_cityscapes_set_up() {
    let fixture = root().join("tests/fixtures/nets/yolo");
    let dir = voc_folder("cityscapes");
    let mut list = String::new();
    for i in 1..=5 {
        let xml = std::fs::read_to_string(dir.join(format!("Labels/{i}.xml"))).unwrap();
        let number = |text: &str, tag: &str| -> u32 {
            let from = text.find(&format!("<{tag}>")).unwrap() + tag.len() + 2;
            let to = from + text[from..].find('<').unwrap();
            text[from..to].trim().parse::<f32>().unwrap() as u32
        };
        let (w, h) = (number(&xml, "width"), number(&xml, "height"));
        let boxes: Vec<[u32; 4]> = xml
            .split("<bndbox>")
            .skip(1)
            .map(|b| ["xmin", "ymin", "xmax", "ymax"].map(|t| number(b, t)))
            .collect();
        // Cityscapes' values: 26 is a car (class 3), 7 the road (class 1).
        let label = image::GrayImage::from_fn(w, h, |x, y| {
            let car = boxes
                .iter()
                .any(|b| (b[0]..b[2]).contains(&x) && (b[1]..b[3]).contains(&y));
            image::Luma([if car {
                26
            } else if y > 2 * h / 3 {
                7
            } else {
                0
            }])
        });
        label.save(dir.join(format!("Labels/{i}_seg.png"))).unwrap();
        list.push_str(&format!(
            "Images/{i}.jpg Labels/{i}.xml Labels/{i}_seg.png\n"
        ));
    }
    std::fs::write(dir.join("cityscapes.txt"), list).unwrap();
    // Its detector has one class: every object is label 1.
    let labels = std::fs::read_to_string(dir.join("labelmap.prototxt")).unwrap();
    let one_class: String = labels
        .lines()
        .map(|l| match l.trim() {
            "label: 0" => l.to_string(),
            t if t.starts_with("label: ") => "  label: 1".to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.join("labelmap_one.prototxt"), one_class).unwrap();
    let lines = blobflow_ok(
        &dir,
        &[
            "convert_annoset",
            "--anno_type=detection_with_segmentation",
            "--label_type=xml",
            "--label_map_file=labelmap_one.prototxt",
            "--encoded",
            "--encode_type=jpg",
            "./",
            "cityscapes.txt",
            "cityscapes_lmdb",
        ],
    );
    assert!(
        lines.iter().any(|l| l == "Processed 5 files."),
        "{lines:#?}"
    );
    std::fs::copy(
        fixture.join("cityscapes_labelmap_seg.prototxt"),
        dir.join("labelmap_seg.prototxt"),
    )
    .unwrap();
    for (net, edits) in [
        (
            "train",
            &[
                ("batch_size: 4", "batch_size: 1"),
                (
                    "examples/cityscapes/cityscapes_train_lmdb",
                    "cityscapes_lmdb",
                ),
                (
                    "num_output: 19 # channel = class number",
                    "num_output: 3 # channel = class number",
                ),
            ][..],
        ),
        (
            "test",
            &[("examples/cityscapes/cityscapes_val_lmdb", "cityscapes_lmdb")][..],
        ),
    ] {
        let text = std::fs::read_to_string(
            fixture.join(format!("cityscapes_mobilenet_yolov3_{net}.prototxt")),
        )
        .unwrap()
        .replace(
            "data/cityscapes/labelmap_seg.prototxt",
            "labelmap_seg.prototxt",
        );
        std::fs::write(dir.join(format!("{net}.prototxt")), edited(text, edits)).unwrap();
    }
    let solver =
        std::fs::read_to_string(fixture.join("cityscapes_mobilenet_yolov3_solver.prototxt"))
            .unwrap();
    let solver = edited(
        solver,
        &[
            (
                "models/cityscapes/mobilenet_yolov3_train.prototxt",
                "train.prototxt",
            ),
            (
                "models/cityscapes/mobilenet_yolov3_test.prototxt",
                "test.prototxt",
            ),
            ("test_iter: 500", "test_iter: 5"),
            ("test_interval: 1000", "test_interval: 2"),
            ("display: 10", "display: 1"),
            ("max_iter: 120000", "max_iter: 2"),
            ("snapshot: 1000", "snapshot: 0"),
            ("solver_mode: GPU", "solver_mode: CPU"),
            ("average_loss: 10", "average_loss: 1"),
            ("iter_size: 16", "iter_size: 1"),
            ("snapshot_after_train: true", "snapshot_after_train: false"),
        ],
    );
    std::fs::write(dir.join("solver.prototxt"), solver).unwrap();
    let lines = blobflow_ok(&dir, &["train", "--solver", "solver.prototxt"]);
    let seg_losses: Vec<f64> = lines
        .iter()
        .filter_map(|l| after(l, "Train net output #0: Seg_loss = "))
        .collect();
    assert_eq!(seg_losses.len(), 2, "{lines:#?}");
    assert!(
        seg_losses.iter().all(|l| l.is_finite() && *l > 0.0),
        "{seg_losses:?}"
    );
    // Each class's overlap, their mean, and the detector's mAP.
    let ious: Vec<f64> = (0..3)
        .map(|c| {
            let key = format!("Seg Classes {c} IOU : ");
            let found: Vec<f64> = lines.iter().filter_map(|l| after(l, &key)).collect();
            assert_eq!(found.len(), 1, "{key}: {lines:#?}");
            found[0]
        })
        .collect();
    assert!(ious.iter().all(|v| (0.0..=1.0).contains(v)), "{ious:?}");
    let mean: Vec<f64> = lines
        .iter()
        .filter_map(|l| after(l, "Seg mIOU : "))
        .collect();
    assert_eq!(mean.len(), 1, "{lines:#?}");
    assert!(
        (mean[0] - ious.iter().sum::<f64>() / 3.0).abs() < 1e-5,
        "{mean:?} {ious:?}"
    );
    let map: Vec<f64> = lines
        .iter()
        .filter_map(|l| after(l, "Test net output #0: detection_eval = "))
        .collect();
    assert_eq!(map.len(), 1, "{lines:#?}");
    assert!((0.0..=1.0).contains(&map[0]), "{map:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Assisted excitation as the YOLO fork trains it: MobileNetV3-YOLOv3's
/// VOC set-up with `AssistedExcitation` (`models/mobilenetv3_voc`:
/// `train_AE.prototxt`, its solver's `multifixed` warm-up, RMSProp and
/// `iter_size: 4` cut to 1), the excitation scheduled by the solver's
/// iteration, tested into a mean average precision.
#[test]
fn mobilenetv3_yolo_trains_with_assisted_excitation() {
    let lines = train_yolo_set_up(
        "mobilenetv3_ae",
        (8, 1),
        &[
            ("models/mobilenet-v3-voc/train.prototxt", "train.prototxt"),
            ("models/mobilenet-v3-voc/test.prototxt", "test.prototxt"),
            ("test_iter: 4952", "test_iter: 1"),
            ("test_interval: 1000", "test_interval: 2"),
            ("display: 10", "display: 1"),
            ("max_iter: 120000", "max_iter: 2"),
            ("snapshot: 1000", "snapshot: 0"),
            ("solver_mode: GPU", "solver_mode: CPU"),
            ("average_loss: 10", "average_loss: 1"),
            ("iter_size: 4", "iter_size: 1"),
            ("snapshot_after_train: true", "snapshot_after_train: false"),
        ],
    );
    let losses = printed_losses(&lines);
    assert_eq!(losses.len(), 3, "{lines:#?}");
    assert!(
        losses.iter().all(|&(_, l)| l.is_finite() && l > 0.0),
        "{losses:?}"
    );
}

/// Lane detection as the YOLO fork trains it: MobileNet-YOLOv3 lite's
/// TuSimple set-up (`models/tusimple`: `LaneData` with its jitter,
/// distortion and three resize interpolations, the lanes drawn a pixel
/// wide at a quarter of the 512 x 512 input and learnt by `YoloSeg`,
/// their pixel counts by two `Reduction`s, the point labels silenced;
/// RMSProp) on the five photos, each given two TuSimple lanes (a JSON
/// file as TuSimple's, `-2` where a lane does not reach) and stored by
/// `convert_annoset --anno_type=lane_detection --label_type=json` as
/// the fork's `create_data.sh` stores TuSimple.
#[test]
fn mobilenet_yolov3_trains_lane_detection_from_its_tusimple_set_up() {
    let fixture = root().join("tests/fixtures/nets/yolo");
    let dir = voc_folder("tusimple");
    let mut list = String::new();
    for i in 1..=5 {
        let (w, h) = image::image_dimensions(dir.join(format!("Images/{i}.jpg"))).unwrap();
        let heights: Vec<u32> = (0..12).map(|s| h / 3 + s * (h - 1 - h / 3) / 11).collect();
        // Two lanes meeting towards the horizon; the left one starts low.
        let lane = |from: f64, to: f64, skip: usize| -> Vec<i64> {
            (0..heights.len())
                .map(|s| {
                    let t = s as f64 / (heights.len() - 1) as f64;
                    if s < skip {
                        -2
                    } else {
                        (f64::from(w) * (from + (to - from) * t)) as i64
                    }
                })
                .collect()
        };
        let json = format!(
            "{{\"lanes\": [{:?}, {:?}], \"h_samples\": {heights:?}, \"raw_file\": \"clips/{i}.jpg\"}}",
            lane(0.45, 0.1, 3),
            lane(0.55, 0.9, 0)
        );
        std::fs::write(dir.join(format!("Labels/{i}.json")), json).unwrap();
        list.push_str(&format!("Images/{i}.jpg Labels/{i}.json\n"));
    }
    std::fs::write(dir.join("train.txt"), list).unwrap();
    let lines = blobflow_ok(
        &dir,
        &[
            "convert_annoset",
            "--anno_type=lane_detection",
            "--label_type=json",
            "--encoded",
            "--encode_type=jpg",
            "./",
            "train.txt",
            "tusimple_lmdb",
        ],
    );
    assert!(
        lines.iter().any(|l| l == "Processed 5 files."),
        "{lines:#?}"
    );
    let train =
        std::fs::read_to_string(fixture.join("tusimple_mobilenet_yolov3_lite_train.prototxt"))
            .unwrap();
    let train = edited(
        train,
        &[
            ("batch_size: 8", "batch_size: 1"),
            ("examples/tusimple/tusimple_train_lmdb", "tusimple_lmdb"),
        ],
    );
    std::fs::write(dir.join("train.prototxt"), train).unwrap();
    let solver =
        std::fs::read_to_string(fixture.join("tusimple_mobilenet_yolov3_lite_solver.prototxt"))
            .unwrap();
    let solver = edited(
        solver,
        &[
            (
                "models/tusimple/mobilenet_yolov3_lite_train.prototxt",
                "train.prototxt",
            ),
            ("display: 10", "display: 1"),
            ("max_iter: 50000", "max_iter: 2"),
            ("snapshot: 1000", "snapshot: 0"),
            ("solver_mode: GPU", "solver_mode: CPU"),
            ("average_loss: 10", "average_loss: 1"),
            ("iter_size: 8", "iter_size: 1"),
            ("snapshot_after_train: true", "snapshot_after_train: false"),
        ],
    );
    std::fs::write(dir.join("solver.prototxt"), solver).unwrap();
    let lines = blobflow_ok(&dir, &["train", "--solver", "solver.prototxt"]);
    let seg_losses: Vec<f64> = lines
        .iter()
        .filter_map(|l| after(l, "Train net output #0: Seg_loss = "))
        .collect();
    assert_eq!(seg_losses.len(), 2, "{lines:#?}");
    assert!(
        seg_losses.iter().all(|l| l.is_finite() && *l > 0.0),
        "{seg_losses:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
