//! An ML crate on blobflow that re-exports `blob!` and the typed API, so
//! its users need no `blobflow` dependency of their own.

pub use blobflow::typed;
pub use blobflow::{BlobError, blob};

/// ReLU in place, for any shape.
pub fn relu<S: typed::Shape>(x: &typed::TypedBlob<f32, S>) -> Result<(), BlobError> {
    x.mutable_cpu_data()?
        .iter_mut()
        .for_each(|v| *v = v.max(0.0));
    Ok(())
}
