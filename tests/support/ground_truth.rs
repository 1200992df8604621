//! The ground truth of `tests/fixtures` (`*.expected.json`): where the files
//! are, and the comparison of one blob's summary with it. Shared by the
//! runtime's tests and the `blobflow` command's.

// Each test file that includes this module uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `tests/fixtures` of the repository, from any package in it.
pub fn fixtures() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = if here.join("tests/fixtures").is_dir() {
        here.to_path_buf()
    } else {
        here.join("..")
    };
    root.join("tests/fixtures")
}

pub fn expected_files() -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    let mut stack = vec![fixtures()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(name) = p.to_str().and_then(|s| s.strip_suffix(".expected.json")) {
                let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
                out.push((PathBuf::from(name), v));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 12, "expected-json fixtures: {}", out.len());
    out
}

/// Compares one blob summary: shape and count equal, sum_abs within 1e-9
/// relative, first5 exact.
pub fn check_blob(
    what: &str,
    want: &Value,
    got_shape: &[i64],
    got_count: u64,
    got_sum: f64,
    got_first: &[f64],
) {
    let shape: Vec<i64> = want["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect();
    assert_eq!(got_shape, shape, "{what}: shape");
    assert_eq!(got_count, want["count"].as_u64().unwrap(), "{what}: count");
    let sum = want["sum_abs"].as_f64().unwrap();
    assert!(
        (got_sum - sum).abs() <= 1e-9 * sum.abs().max(1e-300),
        "{what}: sum_abs {got_sum} vs {sum}"
    );
    let first: Vec<f64> = want["first5"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(got_first, first, "{what}: first5");
}

/// The real LeNet model with one byte of conv1's weight shape flipped: the
/// stored dims say 12 1 5 5 (300 values) while 500 values follow.
pub fn lenet_with_a_flipped_dim() -> Vec<u8> {
    let mut bytes = std::fs::read(fixtures().join("lenet/lenet_iter_10000.caffemodel")).unwrap();
    // conv1's weight shape as stored: field 7 holding BlobShape {dim: 20 1 5 5}.
    let shape = [0x3a, 0x06, 0x0a, 0x04, 0x14, 0x01, 0x05, 0x05];
    let at = bytes
        .windows(shape.len())
        .position(|w| w == shape)
        .expect("conv1's shape is in the file");
    bytes[at + 4] ^= 0x18; // 20 becomes 12
    bytes
}

/// What every tool says of [`lenet_with_a_flipped_dim`].
pub const FLIPPED_DIM_ERROR: &str =
    "layer 'conv1' blob 0: shape 12 1 5 5 has 300 values but the file stores 500 (in data)";
