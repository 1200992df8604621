//! A device made of host memory, for testing without a GPU.
//!
//! [`HostDevice`] implements [`DeviceBackend`] over ordinary memory and
//! counts what the runtime asks of it: allocations, uploads, downloads
//! and device-side math. Blobs made `with_device` on it (or moved there
//! with [`Blob::move_to`](crate::Blob::move_to)) go through every state of
//! Caffe's head as on a GPU, so code that places blobs on a device (a
//! net's `to_device`, a solver's history, a layer choosing its side) runs
//! in CI. Layers have no kernels for it and run their CPU side through
//! the heads, as a layer without a CUDA side does between two that have
//! one on a GPU. It is never a GPU: nothing here is faster than the host.
//!
//! ```
//! use blob_runtime::{Blob, Head, host_device::HostDevice};
//! let device = HostDevice::new();
//! let mut w = Blob::<f32>::new(&[4])?;
//! w.mutable_cpu_data()?.fill(2.0);
//! w.move_to(device.clone())?;
//! drop(w.gpu_data()?); // uploaded: the head is SYNCED
//! assert_eq!(w.data_head(), Head::Synced);
//! assert_eq!(device.uploads(), 1);
//! assert_eq!(w.asum_data()?, 8.0); // on the "device"
//! assert_eq!(device.math_calls(), 1);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use blob_kernels::cpu;

use crate::device::{
    DeviceBackend, DeviceBuffer, DeviceStream, Precision, own_buffer, own_buffer_mut, too_short,
};
use crate::error::DeviceError;

/// Memory of a [`HostDevice`]: plain bytes, 8-byte aligned so that `f64`
/// views of them are sound.
#[derive(Debug)]
pub struct HostDeviceBuffer {
    words: Vec<u64>,
    len: usize,
}

impl HostDeviceBuffer {
    /// The buffer's bytes: what a kernel would see on a device.
    ///
    /// ```
    /// use blob_runtime::{Blob, host_device::{HostDevice, HostDeviceBuffer}};
    /// let b = Blob::<f32>::with_device(&[1], HostDevice::new())?;
    /// let on_device = b.gpu_data()?;
    /// let buffer: &HostDeviceBuffer = on_device.as_any().downcast_ref().unwrap();
    /// assert_eq!(buffer.bytes(), &[0, 0, 0, 0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    /// The buffer's bytes, writable: a test writing "on the device".
    ///
    /// ```
    /// use blob_runtime::{Blob, host_device::{HostDevice, HostDeviceBuffer}};
    /// let b = Blob::<f32>::with_device(&[1], HostDevice::new())?;
    /// {
    ///     let mut on_device = b.mutable_gpu_data()?;
    ///     let buffer: &mut HostDeviceBuffer = on_device.as_any_mut().downcast_mut().unwrap();
    ///     buffer.bytes_mut().copy_from_slice(&1.5f32.to_ne_bytes());
    /// }
    /// assert_eq!(b.data_at(&[0]), 1.5);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }

    /// The first `n` elements as `T` (the words are 8-byte aligned, so
    /// only the length can be wrong).
    fn elements<T: bytemuck::Pod>(&self, n: usize) -> Result<&[T], DeviceError> {
        let len = self.len;
        n.checked_mul(size_of::<T>())
            .and_then(|bytes| self.bytes().get(..bytes))
            .map(bytemuck::cast_slice)
            .ok_or_else(|| too_short(n, len))
    }

    /// The first `n` elements as `T`, writable.
    fn elements_mut<T: bytemuck::Pod>(&mut self, n: usize) -> Result<&mut [T], DeviceError> {
        let len = self.len;
        n.checked_mul(size_of::<T>())
            .and_then(|bytes| self.bytes_mut().get_mut(..bytes))
            .map(bytemuck::cast_slice_mut)
            .ok_or_else(|| too_short(n, len))
    }
}

impl DeviceBuffer for HostDeviceBuffer {
    fn len(&self) -> usize {
        self.len
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A stream of a [`HostDevice`], for
/// [`SyncedMemory::async_gpu_push`](crate::SyncedMemory::async_gpu_push):
/// its pushes are complete on return.
///
/// ```
/// use blob_runtime::{SyncedMemory, host_device::{HostDevice, HostStream}};
/// let device = HostDevice::new();
/// let mem = SyncedMemory::with_device(16, device.clone());
/// mem.mutable_cpu_data()?;
/// mem.async_gpu_push(&HostStream)?;
/// assert_eq!(device.uploads(), 1);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct HostStream;

impl DeviceStream for HostStream {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A device backend over host memory that counts what it is asked to do.
/// See the [module docs](self).
#[derive(Debug, Default)]
pub struct HostDevice {
    allocs: AtomicUsize,
    uploads: AtomicUsize,
    downloads: AtomicUsize,
    math_calls: AtomicUsize,
}

impl HostDevice {
    /// A new device with every count at zero.
    ///
    /// ```
    /// assert_eq!(blob_runtime::host_device::HostDevice::new().allocs(), 0);
    /// ```
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Buffers allocated on the device.
    ///
    /// ```
    /// use blob_runtime::{Blob, host_device::HostDevice};
    /// let device = HostDevice::new();
    /// let b = Blob::<f32>::with_device(&[3], device.clone())?;
    /// drop(b.gpu_data()?);
    /// assert_eq!(device.allocs(), 1);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn allocs(&self) -> usize {
        self.allocs.load(Ordering::SeqCst)
    }

    /// Host-to-device copies, asynchronous pushes included.
    ///
    /// ```
    /// let device = blob_runtime::host_device::HostDevice::new();
    /// assert_eq!(device.uploads(), 0);
    /// ```
    pub fn uploads(&self) -> usize {
        self.uploads.load(Ordering::SeqCst)
    }

    /// Device-to-host copies.
    ///
    /// ```
    /// use blob_runtime::{Blob, host_device::HostDevice};
    /// let device = HostDevice::new();
    /// let b = Blob::<f32>::with_device(&[3], device.clone())?;
    /// drop(b.mutable_gpu_data()?);
    /// drop(b.cpu_data()?);
    /// assert_eq!(device.downloads(), 1);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn downloads(&self) -> usize {
        self.downloads.load(Ordering::SeqCst)
    }

    /// Math run on the device: copies, axpy, scal, asum, dot.
    ///
    /// ```
    /// let device = blob_runtime::host_device::HostDevice::new();
    /// assert_eq!(device.math_calls(), 0);
    /// ```
    pub fn math_calls(&self) -> usize {
        self.math_calls.load(Ordering::SeqCst)
    }

    fn count(counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

fn mine(b: &dyn DeviceBuffer) -> Result<&HostDeviceBuffer, DeviceError> {
    own_buffer(b, "a host device")
}

fn mine_mut(b: &mut dyn DeviceBuffer) -> Result<&mut HostDeviceBuffer, DeviceError> {
    own_buffer_mut(b, "a host device")
}

/// Copies `bytes.len()` bytes into the front of `dst`, or says why not.
fn fill(dst: &mut HostDeviceBuffer, bytes: &[u8]) -> Result<(), DeviceError> {
    let len = dst.len;
    dst.bytes_mut()
        .get_mut(..bytes.len())
        .ok_or_else(|| too_short(bytes.len(), len))?
        .copy_from_slice(bytes);
    Ok(())
}

impl DeviceBackend for HostDevice {
    /// DLPack's extension device (`kDLExtDev`, 12), reserved for testing
    /// a device: a blob on the host device lends its "device" memory as
    /// a CUDA one lends its GPU's.
    fn dlpack_device(&self) -> Option<(u32, i32)> {
        Some((12, 0))
    }

    fn device_address(&self, buffer: &dyn DeviceBuffer) -> Result<u64, DeviceError> {
        Ok(own_buffer::<HostDeviceBuffer>(buffer, "the host device")?
            .words
            .as_ptr() as u64)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> String {
        "host memory standing in for a device".into()
    }

    fn alloc_zeroed(&self, bytes: usize) -> Result<Box<dyn DeviceBuffer>, DeviceError> {
        Self::count(&self.allocs);
        Ok(Box::new(HostDeviceBuffer {
            words: vec![0; bytes.div_ceil(8)],
            len: bytes,
        }))
    }

    fn upload(&self, src: &[u8], dst: &mut dyn DeviceBuffer) -> Result<(), DeviceError> {
        Self::count(&self.uploads);
        fill(mine_mut(dst)?, src)
    }

    fn download(&self, src: &dyn DeviceBuffer, dst: &mut [u8]) -> Result<(), DeviceError> {
        Self::count(&self.downloads);
        let src = mine(src)?;
        let bytes = src
            .bytes()
            .get(..dst.len())
            .ok_or_else(|| too_short(dst.len(), src.len))?;
        dst.copy_from_slice(bytes);
        Ok(())
    }

    fn upload_async(
        &self,
        src: &[u8],
        dst: &mut dyn DeviceBuffer,
        stream: &dyn DeviceStream,
    ) -> Result<(), DeviceError> {
        stream
            .as_any()
            .downcast_ref::<HostStream>()
            .ok_or_else(|| DeviceError::new("not a stream of a host device"))?;
        Self::count(&self.uploads);
        fill(mine_mut(dst)?, src)
    }

    fn copy(
        &self,
        bytes: usize,
        src: &dyn DeviceBuffer,
        dst: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError> {
        Self::count(&self.math_calls);
        let src = mine(src)?;
        let from = src
            .bytes()
            .get(..bytes)
            .ok_or_else(|| too_short(bytes, src.len))?;
        fill(mine_mut(dst)?, from)
    }

    fn axpy(
        &self,
        p: Precision,
        n: usize,
        alpha: f64,
        x: &dyn DeviceBuffer,
        y: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError> {
        Self::count(&self.math_calls);
        let (x, y) = (mine(x)?, mine_mut(y)?);
        match p {
            Precision::F32 => cpu::axpy(alpha as f32, x.elements(n)?, y.elements_mut(n)?),
            Precision::F64 => cpu::axpy(alpha, x.elements(n)?, y.elements_mut(n)?),
        }
        Ok(())
    }

    fn scal(
        &self,
        p: Precision,
        n: usize,
        alpha: f64,
        x: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError> {
        Self::count(&self.math_calls);
        let x = mine_mut(x)?;
        match p {
            Precision::F32 => cpu::scal(alpha as f32, x.elements_mut(n)?),
            Precision::F64 => cpu::scal(alpha, x.elements_mut(n)?),
        }
        Ok(())
    }

    fn asum(&self, p: Precision, n: usize, x: &dyn DeviceBuffer) -> Result<f64, DeviceError> {
        Self::count(&self.math_calls);
        let x = mine(x)?;
        Ok(match p {
            Precision::F32 => f64::from(cpu::asum(x.elements::<f32>(n)?)),
            Precision::F64 => cpu::asum(x.elements::<f64>(n)?),
        })
    }

    fn dot(
        &self,
        p: Precision,
        n: usize,
        x: &dyn DeviceBuffer,
        y: &dyn DeviceBuffer,
    ) -> Result<f64, DeviceError> {
        Self::count(&self.math_calls);
        let (x, y) = (mine(x)?, mine(y)?);
        Ok(match p {
            Precision::F32 => f64::from(cpu::dot(x.elements::<f32>(n)?, y.elements(n)?)),
            Precision::F64 => cpu::dot(x.elements::<f64>(n)?, y.elements(n)?),
        })
    }
}
