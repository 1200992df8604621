//! `blob_runtime::blob!` from a crate with no `blobflow` dependency.

use blob_runtime::blob;
use downstream_runtime_only::{Linear, Pixels, crop5};

#[test]
fn a_linear_layer_on_typed_blobs() -> Result<(), blob_runtime::BlobError> {
    let layer = Linear::<blob_runtime::typed::D<3>, blob_runtime::typed::D<2>>::zeros()?;
    layer
        .weights
        .mutable_cpu_data()?
        .copy_from_slice(&[1.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
    layer.bias.mutable_cpu_data()?.copy_from_slice(&[0.5, -1.0]);
    let x = <blob!(f32; _, 3)>::with_dynamic(2)?;
    x.mutable_cpu_data()?
        .copy_from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let y = layer.forward(&x)?;
    assert_eq!(y.shape(), &[2, 2]);
    assert_eq!(&*y.cpu_data()?, &[1.5, 4.0, 4.5, 10.0]);
    Ok(())
}

#[test]
fn named_shapes_and_generic_arithmetic() -> Result<(), blob_runtime::BlobError> {
    let images = blob_runtime::typed::TypedBlob::<f32, Pixels>::with_dynamic(4)?;
    assert_eq!(images.shape(), &[4, 1, 28, 28]);
    assert_eq!((Pixels::AXIS_C, Pixels::DIM_H), (1, 28));
    // A declared shape meets generic code under its dims, for free.
    let images: blob!(f32; _, 1, 28, 28) = images.into_shape();
    let cropped = crop5(&images)?;
    assert_eq!(cropped.shape(), &[4, 1, 24, 24]);
    Ok(())
}
