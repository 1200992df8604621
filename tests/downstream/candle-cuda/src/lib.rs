//! GPU tensors between blobflow and candle on one stream, the way a user
//! of both writes it: blobflow's `CudaBackend` runs on candle's stream, a
//! blob's device memory becomes a candle tensor without a copy, and a
//! candle tensor comes back as a blob with one device-to-device copy
//! (candle lends its buffer, it does not give it away).

use std::sync::Arc;

use blobflow::Blob;
use blobflow::runtime::cuda::CudaBackend;
use candle_core::cuda_backend::{CudaDevice, CudaStorage};
use candle_core::op::BackpropOp;
use candle_core::{Storage, Tensor};

/// What went wrong, from either library.
#[derive(Debug)]
pub enum Error {
    /// blobflow refused.
    Blob(blobflow::BlobError),
    /// candle refused.
    Candle(candle_core::Error),
}

impl From<blobflow::BlobError> for Error {
    fn from(e: blobflow::BlobError) -> Self {
        Self::Blob(e)
    }
}

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Self {
        Self::Candle(e)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Blob(e) => write!(f, "blobflow: {e}"),
            Self::Candle(e) => write!(f, "candle: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// blobflow's GPU backend on candle's device and stream: work queued by
/// either library runs in order, with no synchronisation between them.
pub fn backend_on(device: &CudaDevice) -> Result<Arc<CudaBackend>, Error> {
    Ok(CudaBackend::from_stream(device.cuda_stream())?)
}

/// The blob's memory as a candle tensor of its shape, moved, not copied
/// (where the blob shares its memory with another, blobflow copies it).
pub fn blob_into_tensor(blob: Blob<f32>, device: &CudaDevice) -> Result<Tensor, Error> {
    let shape = blob.shape().to_vec();
    let slice = blob.into_cuda_slice()?;
    let storage = CudaStorage::wrap_cuda_slice(slice, device.clone());
    Ok(Tensor::from_storage(
        Storage::Cuda(storage),
        shape,
        BackpropOp::none(),
        false,
    ))
}

/// A contiguous f32 candle tensor on the GPU as a blob on `backend`: one
/// device-to-device copy.
pub fn tensor_to_blob(tensor: &Tensor, backend: &Arc<CudaBackend>) -> Result<Blob<f32>, Error> {
    let tensor = tensor.contiguous()?;
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cuda(cuda) = &*storage else {
        return Err(candle_core::Error::Msg("the tensor is not on a GPU".into()).into());
    };
    let all = cuda.as_cuda_slice::<f32>()?;
    let start = layout.start_offset();
    let count = tensor.elem_count();
    let copy = backend
        .gpu()
        .stream()
        .clone_dtod(&all.slice(start..start + count))
        .map_err(|e| candle_core::Error::Msg(format!("device copy: {e}")))?;
    Ok(Blob::from_cuda_slice(tensor.dims(), copy, backend)?)
}
