//! The device side of [`crate::SyncedMemory`], as a trait a GPU backend
//! implements.
//!
//! The state machine never names CUDA: it asks a [`DeviceBackend`] to
//! allocate, transfer and run the few math routines a blob needs (Caffe's
//! `Update`, `asum`, `sumsq`, `scale`). The CUDA backend lives behind the
//! `cuda` feature; with no backend attached, GPU accessors return
//! [`crate::BlobError::NoDevice`].

use std::any::Any;
use std::fmt::Debug;

use crate::error::DeviceError;
use crate::host_buffer::HostBuffer;

/// Floating-point precision of a device math call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

/// A block of device memory owned by a backend.
///
/// The backend recognises its own buffers through [`DeviceBuffer::as_any`].
pub trait DeviceBuffer: Send + Sync + Debug {
    /// Size in bytes.
    fn len(&self) -> usize;
    /// Whether the buffer holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// For the backend to downcast to its own buffer type.
    fn as_any(&self) -> &dyn Any;
    /// For the backend to downcast to its own buffer type.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// A queue of device work that [`crate::SyncedMemory::async_gpu_push`] enqueues on.
pub trait DeviceStream: Send + Sync + Debug {
    /// For the backend to downcast to its own stream type.
    fn as_any(&self) -> &dyn Any;
}

/// Device work that was queued and may not have run yet: a
/// [`DeviceBackend::start_upload`] still reading its host bytes.
///
/// ```
/// use blob_runtime::{DeviceError, DeviceFence};
/// /// Work that ran before it was handed out.
/// #[derive(Debug)]
/// struct Done;
/// impl DeviceFence for Done {
///     fn wait(&self) -> Result<(), DeviceError> {
///         Ok(())
///     }
/// }
/// assert!(Done.wait().is_ok());
/// ```
pub trait DeviceFence: Send + Sync + Debug {
    /// Returns once the work is done (CUDA: `cuEventSynchronize`).
    fn wait(&self) -> Result<(), DeviceError>;
}

/// What a GPU (or the [host device](crate::host_device)) must provide for the runtime.
///
/// Math methods take element counts `n`, and scalars as `f64` (exact for
/// every `f32`); results come back as `f64`.
pub trait DeviceBackend: Send + Sync + Debug {
    /// A short name for messages, e.g. `"cuda:0 (NVIDIA H100)"`.
    fn name(&self) -> String;
    /// For layers to recognise a backend they have kernels for (the CUDA
    /// one) and reach its device.
    fn as_any(&self) -> &dyn Any;
    /// Device memory of `bytes`, zero-filled (Caffe: cudaMalloc + memset).
    fn alloc_zeroed(&self, bytes: usize) -> Result<Box<dyn DeviceBuffer>, DeviceError>;
    /// Host memory for a buffer that will be synced with the device: pinned
    /// where the backend can, zero-filled. The default is ordinary memory.
    fn alloc_host(&self, bytes: usize) -> Result<HostBuffer, DeviceError> {
        HostBuffer::zeroed(bytes).map_err(|e| DeviceError::with_source("host allocation", e))
    }
    /// Host to device, complete on return.
    fn upload(&self, src: &[u8], dst: &mut dyn DeviceBuffer) -> Result<(), DeviceError>;
    /// Where this backend's memory is, as DLPack names devices (`(device
    /// type, device id)`; CUDA is `(2, ordinal)`), for lending it without
    /// a copy ([`Blob::to_dlpack_device`](crate::Blob)); `None`, the
    /// default, where it cannot be lent.
    fn dlpack_device(&self) -> Option<(u32, i32)> {
        None
    }
    /// The device address of `buffer`'s first byte, for lending it.
    fn device_address(&self, buffer: &dyn DeviceBuffer) -> Result<u64, DeviceError> {
        let _ = buffer;
        Err(DeviceError::new(format!(
            "{} does not lend its memory's addresses",
            self.name()
        )))
    }
    /// Returns once the work queued on the device is done: before its
    /// memory is lent to a library whose work is queued elsewhere.
    fn synchronize(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    /// Device memory another library owns, as a buffer of this backend
    /// (a DLPack tensor adopted by
    /// [`Blob::from_dlpack_on`](crate::Blob)); `owner` is dropped, giving
    /// the memory back, when the buffer is. The default refuses.
    ///
    /// # Safety
    ///
    /// `address` must be memory of this backend's device, valid for reads
    /// and writes of `len` bytes until `owner` is dropped, with no work
    /// pending on it elsewhere.
    unsafe fn adopt(
        &self,
        address: u64,
        len: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Result<Box<dyn DeviceBuffer>, DeviceError> {
        let _ = (address, len, owner);
        Err(DeviceError::new(format!(
            "{} cannot adopt another library's memory",
            self.name()
        )))
    }
    /// Host to device, queued behind the device's earlier work: returns
    /// without waiting for the copy where the backend can (CUDA, from
    /// pinned memory), with a fence that is done once `src` has been
    /// read. [`crate::SyncedMemory`] waits on it before its host bytes
    /// are written, replaced or freed, so that the host runs ahead of the
    /// device instead of stalling at every upload. The default is
    /// [`upload`](Self::upload), complete on return (no fence).
    ///
    /// # Safety
    ///
    /// `src` must stay allocated and unwritten until the fence's
    /// [`wait`](DeviceFence::wait) has returned.
    unsafe fn start_upload(
        &self,
        src: &[u8],
        dst: &mut dyn DeviceBuffer,
    ) -> Result<Option<Box<dyn DeviceFence>>, DeviceError> {
        self.upload(src, dst).map(|()| None)
    }
    /// Sets the first `bytes` of `x` to zero (Caffe `caffe_gpu_set(n, 0,
    /// x)`). The default uploads zeros; a backend with a device-side fill
    /// overrides it.
    fn zero(&self, bytes: usize, x: &mut dyn DeviceBuffer) -> Result<(), DeviceError> {
        self.upload(&vec![0u8; bytes], x)
    }
    /// Device to host, complete on return.
    fn download(&self, src: &dyn DeviceBuffer, dst: &mut [u8]) -> Result<(), DeviceError>;
    /// Host to device, enqueued on `stream`; the caller synchronizes.
    fn upload_async(
        &self,
        src: &[u8],
        dst: &mut dyn DeviceBuffer,
        stream: &dyn DeviceStream,
    ) -> Result<(), DeviceError>;
    /// Device to device copy of the first `bytes` bytes.
    fn copy(
        &self,
        bytes: usize,
        src: &dyn DeviceBuffer,
        dst: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError>;
    /// `y += alpha x` over `n` elements.
    fn axpy(
        &self,
        p: Precision,
        n: usize,
        alpha: f64,
        x: &dyn DeviceBuffer,
        y: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError>;
    /// `x *= alpha` over `n` elements.
    fn scal(
        &self,
        p: Precision,
        n: usize,
        alpha: f64,
        x: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError>;
    /// Sum of `|x|` over `n` elements.
    fn asum(&self, p: Precision, n: usize, x: &dyn DeviceBuffer) -> Result<f64, DeviceError>;
    /// Dot product over `n` elements.
    fn dot(
        &self,
        p: Precision,
        n: usize,
        x: &dyn DeviceBuffer,
        y: &dyn DeviceBuffer,
    ) -> Result<f64, DeviceError>;
}

/// The error of a view or copy of `n` elements (or bytes) that a
/// `bytes`-byte buffer cannot hold.
pub(crate) fn too_short(n: usize, bytes: usize) -> DeviceError {
    DeviceError::new(format!("{n} elements do not fit a {bytes}-byte buffer"))
}

/// `buffer` as backend `B`'s own buffer type, or an error naming the
/// backend: a buffer of another backend handed to this one.
pub(crate) fn own_buffer<'a, B: 'static>(
    buffer: &'a dyn DeviceBuffer,
    backend: &str,
) -> Result<&'a B, DeviceError> {
    buffer
        .as_any()
        .downcast_ref()
        .ok_or_else(|| DeviceError::new(format!("not a buffer of {backend}")))
}

/// [`own_buffer`], writable.
pub(crate) fn own_buffer_mut<'a, B: 'static>(
    buffer: &'a mut dyn DeviceBuffer,
    backend: &str,
) -> Result<&'a mut B, DeviceError> {
    buffer
        .as_any_mut()
        .downcast_mut()
        .ok_or_else(|| DeviceError::new(format!("not a buffer of {backend}")))
}
