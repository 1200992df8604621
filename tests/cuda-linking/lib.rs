//! A crate whose cudarc links CUDA at build time (candle's choice) and
//! uses blobflow's GPU blobs with the same cudarc types: it builds only if
//! blobflow leaves the linking mode and CUDA version to the final binary.

use std::sync::Arc;

use blobflow::Blob;
use blobflow::runtime::cuda::CudaBackend;
use cudarc::driver::{CudaSlice, CudaStream};

/// A blob over the caller's slice, on the caller's stream: the caller's
/// cudarc and blobflow's are one crate, so the types are the same.
pub fn blob_of(
    slice: CudaSlice<f32>,
    stream: Arc<CudaStream>,
) -> Result<Blob<f32>, blobflow::BlobError> {
    let gpu = CudaBackend::from_stream(stream)?;
    let count = slice.len();
    Blob::from_cuda_slice(&[count], slice, &gpu)
}
