//! Blobs and cudarc's `CudaSlice`s, moved into each other without a copy
//! (feature `cuda`): the GPU twins of [`Blob::from_vec`] and
//! [`Blob::into_vec`], for crates that hold their GPU memory as cudarc
//! slices (candle's CUDA storage, a user's kernels).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DeviceRepr};

use super::Blob;
use crate::cuda::{CudaBackend, CudaBuffer};
use crate::device::{DeviceBackend, DeviceBuffer};
use crate::element::MathElement;
use crate::error::{BlobError, Result};

impl<T: MathElement + DeviceRepr> Blob<T> {
    /// A blob of `shape` on `backend`'s GPU whose device memory is
    /// `slice`, taken over without a copy; the head is at GPU. `slice`
    /// must hold the blob's count of elements, in `backend`'s context.
    /// Work queued on the slice's stream before this call must be ordered
    /// before `backend`'s stream (the same stream, as with
    /// [`CudaBackend::from_stream`], or synchronised).
    ///
    /// ```no_run
    /// use blob_runtime::{Blob, cuda::CudaBackend};
    /// let ctx = blob_runtime::cuda::cudarc::driver::CudaContext::new(0).unwrap();
    /// let stream = ctx.default_stream();
    /// let gpu = CudaBackend::from_stream(stream.clone())?;
    /// let slice = stream.clone_htod(&[1.0f32, 2.0, 3.0]).unwrap();
    /// let blob = Blob::from_cuda_slice(&[3], slice, &gpu)?;
    /// assert_eq!(blob.asum_data()?, 6.0);
    /// let back = blob.into_cuda_slice()?; // the same memory
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn from_cuda_slice(
        shape: &[usize],
        slice: CudaSlice<T>,
        backend: &Arc<CudaBackend>,
    ) -> Result<Self> {
        const OP: &str = "make a blob of a CudaSlice";
        let device: Arc<dyn DeviceBackend> = backend.clone();
        let blob = Self::with_device(shape, device)?;
        if slice.len() != blob.count {
            return Err(BlobError::CountMismatch {
                op: OP,
                what: format!("the slice's elements for shape {}", blob.shape_string()),
                got: slice.len(),
                want: blob.count,
            });
        }
        let gpu = backend.gpu();
        if slice.context().cu_ctx() != gpu.context().cu_ctx() {
            return Err(BlobError::InvalidParameter {
                op: OP,
                detail: format!(
                    "the slice is memory of GPU {}'s context, not of {}",
                    slice.context().ordinal(),
                    backend.name()
                ),
            });
        }
        if blob.count > 0 {
            let buffer = CudaBuffer::owning(slice, gpu.stream());
            blob.data.set_gpu_data(Box::new(buffer))?;
        }
        Ok(blob)
    }

    /// The blob's data as a `CudaSlice` of its count, on its backend's
    /// stream: its own device memory, moved out without a copy, where
    /// this blob alone holds the data, the newest values are on the GPU
    /// and the memory is blobflow's; a copy on the device otherwise (the
    /// data shared, on the host, or another library's through DLPack).
    ///
    /// # Errors
    /// A blob with no CUDA device; a device error.
    pub fn into_cuda_slice(mut self) -> Result<CudaSlice<T>> {
        const OP: &str = "move a blob into a CudaSlice";
        let backend = self
            .device
            .as_ref()
            .and_then(CudaBackend::of)
            .ok_or(BlobError::NoDevice { op: OP })?;
        let stream = backend.gpu().stream().clone();
        let count = self.count;
        if let Some(memory) = Arc::get_mut(&mut self.data)
            && let Some(buffer) = memory.take_device()
        {
            let back: Box<dyn DeviceBuffer> = if buffer.as_any().is::<CudaBuffer>() {
                // SAFETY: the box holds a CudaBuffer (checked just above).
                let buffer = unsafe { Box::from_raw(Box::into_raw(buffer).cast::<CudaBuffer>()) };
                match buffer.into_slice::<T>(count, &stream) {
                    Ok(slice) => return Ok(slice),
                    Err(adopted) => Box::new(adopted),
                }
            } else {
                buffer
            };
            // Not ours to hand out: put it back, and copy.
            memory.set_gpu_data(back)?;
        }
        let on_device = self.gpu_data()?;
        let view = crate::cuda::view::<T>(&on_device, count)
            .map_err(|source| BlobError::Device { op: OP, source })?;
        stream.clone_dtod(&view).map_err(|e| BlobError::Device {
            op: OP,
            source: crate::error::DeviceError::with_source("CUDA driver", e),
        })
    }
}
