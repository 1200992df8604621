//! A first look at blobs: build one, reshape it within its capacity, and run
//! Caffe's `Update` (data -= diff) on it.
//!
//! Run: `cargo run --release --example blob_basics`

use blobflow::prelude::*;

fn main() -> Result<(), BlobError> {
    let mut blob = Blob::<f32>::new(&[64, 3, 32, 32])?;
    println!("made {:?}", blob);

    // First touch allocates and zero-fills; write a ramp as the data and a
    // constant as the gradient.
    for (i, v) in blob.mutable_cpu_data()?.iter_mut().enumerate() {
        *v = (i % 100) as f32 * 0.01;
    }
    blob.mutable_cpu_diff()?.fill(0.005);
    println!(
        "asum(data) = {:.3}, asum(diff) = {:.3}",
        blob.asum_data()?,
        blob.asum_diff()?
    );

    blob.update()?;
    println!("after update: asum(data) = {:.3}", blob.asum_data()?);

    // Same count, different view: nothing is reallocated.
    blob.reshape(&[64, 3 * 32 * 32])?;
    println!(
        "reshaped to {} (capacity {}), element [1, 5] = {}",
        blob.shape_string(),
        blob.capacity(),
        blob.data_at(&[1, 5])
    );

    // Mistakes are errors that name the shapes.
    let other = Blob::<f32>::new(&[64, 3, 32, 32])?;
    if let Err(e) = blob.copy_from(&other, false) {
        println!("as expected: {e}");
    }
    Ok(())
}
