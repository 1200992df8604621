//! Caffe's weight fillers used by LeNet.

use blob_kernels::cpu;

use blob_runtime::{Blob, BlobError};

/// Caffe `XavierFiller` (variance_norm FAN_IN): uniform on
/// `[-sqrt(3 / fan_in), sqrt(3 / fan_in)]`, `fan_in = count / shape[0]`,
/// from the calling thread's generator ([`cpu::set_seed`]).
///
/// ```
/// let w = blob_runtime::Blob::<f32>::new(&[20, 1, 5, 5])?;
/// blob_layers::filler::xavier(&w)?;
/// let scale = (3.0f32 / 25.0).sqrt();
/// assert!(w.cpu_data()?.iter().all(|v| v.abs() <= scale));
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn xavier(blob: &Blob<f32>) -> Result<(), BlobError> {
    let num = blob.shape().first().copied().unwrap_or(1).max(1);
    let fan_in = (blob.count() / num).max(1) as f32;
    let scale = (3.0 / fan_in).sqrt();
    cpu::uniform(-scale, scale, &mut blob.mutable_cpu_data()?)
        .expect("scale is finite and positive");
    Ok(())
}

/// Caffe `ConstantFiller`.
///
/// ```
/// let b = blob_runtime::Blob::<f32>::new(&[3])?;
/// blob_layers::filler::constant(&b, 0.1)?;
/// assert_eq!(&*b.cpu_data()?, &[0.1; 3]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn constant(blob: &Blob<f32>, value: f32) -> Result<(), BlobError> {
    blob.mutable_cpu_data()?.fill(value);
    Ok(())
}
