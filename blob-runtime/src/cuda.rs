//! The CUDA device (feature `cuda`): GPU buffers, pinned host memory and
//! GPU math for [`crate::SyncedMemory`] and [`crate::Blob`].
//!
//! ```no_run
//! use blob_runtime::{Blob, cuda::CudaBackend};
//! let gpu = CudaBackend::new(0)?; // an error, not a panic, without a GPU
//! let blob = Blob::<f32>::with_device(&[64, 10], gpu)?;
//! blob.mutable_cpu_data()?.fill(1.0);
//! drop(blob.gpu_data()?); // H2D, head SYNCED
//! blob.scale_data(2.0)?;  // runs on the GPU (cuBLAS scal)
//! assert_eq!(blob.asum_data()?, 1280.0);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

use std::any::Any;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use blob_kernels::cuda::{CudaError, Gpu};
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr};

use crate::device::{
    DeviceBackend, DeviceBuffer, DeviceFence, DeviceStream, Precision, own_buffer, own_buffer_mut,
    too_short,
};
use crate::error::BlobError;
use crate::error::DeviceError;

use crate::host_buffer::{HOST_ALIGN, HostBuffer};
/// The cudarc blobflow speaks through, so a user names the same
/// `CudaSlice`, `CudaStream` and `CudaContext` types.
pub use cudarc;

fn dev_err(e: CudaError) -> DeviceError {
    DeviceError::with_source("CUDA", e)
}

fn drv_err(e: cudarc::driver::DriverError) -> DeviceError {
    DeviceError::with_source("CUDA driver", e)
}

/// A GPU made available to blobs: one context, stream and cuBLAS handle,
/// the NVRTC-compiled kernels, and pinned host allocation.
#[derive(Debug)]
pub struct CudaBackend {
    gpu: Arc<Gpu>,
    upload_events: Arc<EventPool>,
}

impl CudaBackend {
    /// Opens GPU `ordinal`. Where there is no CUDA driver or no such GPU,
    /// an error that says so.
    ///
    /// ```
    /// if !blob_kernels::cuda::driver_available() {
    ///     let err = blob_runtime::cuda::CudaBackend::new(0).unwrap_err();
    ///     assert!(err.to_string().contains("no CUDA driver"), "{err}");
    /// }
    /// ```
    pub fn new(ordinal: usize) -> Result<Arc<Self>, BlobError> {
        let gpu = Gpu::new(ordinal).map_err(|e: CudaError| BlobError::Device {
            op: "open CUDA device",
            source: dev_err(e),
        })?;
        Ok(Arc::new(Self {
            gpu,
            upload_events: Arc::default(),
        }))
    }

    /// A backend on an existing stream, whose context and GPU it uses:
    /// blobflow's work queues on that stream in order with its owner's
    /// (candle's, a user's cudarc code), so blobs and the owner's
    /// [`CudaSlice`]s move between them without a copy
    /// ([`Blob::from_cuda_slice`](crate::Blob::from_cuda_slice),
    /// [`Blob::into_cuda_slice`](crate::Blob::into_cuda_slice)).
    ///
    /// ```no_run
    /// let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    /// let gpu = blob_runtime::cuda::CudaBackend::from_stream(ctx.default_stream())?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn from_stream(stream: Arc<CudaStream>) -> Result<Arc<Self>, BlobError> {
        let gpu = Gpu::with_stream(stream).map_err(|e: CudaError| BlobError::Device {
            op: "open CUDA device on a stream",
            source: dev_err(e),
        })?;
        Ok(Arc::new(Self {
            gpu,
            upload_events: Arc::default(),
        }))
    }

    /// The GPU's math, for layers that run their own kernels.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The CUDA backend behind `device`, if it is one: how a layer finds
    /// the GPU its blobs live on.
    ///
    /// ```
    /// # fn check(blob: &blob_runtime::Blob<f32>) {
    /// if let Some(cuda) = blob.device().and_then(blob_runtime::cuda::CudaBackend::of) {
    ///     let _gpu = cuda.gpu();
    /// }
    /// # }
    /// ```
    pub fn of(device: &Arc<dyn DeviceBackend>) -> Option<&CudaBackend> {
        device.as_any().downcast_ref()
    }

    /// A new stream for [`crate::SyncedMemory::async_gpu_push`].
    pub fn new_stream(&self) -> Result<CudaStreamHandle, BlobError> {
        let s = self
            .gpu
            .context()
            .new_stream()
            .map_err(|e| BlobError::Device {
                op: "create stream",
                source: drv_err(e),
            })?;
        Ok(CudaStreamHandle(s))
    }
}

/// A CUDA stream for asynchronous pushes; synchronize it before reading
/// what was pushed.
#[derive(Debug, Clone)]
pub struct CudaStreamHandle(pub Arc<CudaStream>);

impl DeviceStream for CudaStreamHandle {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Events for the fences of uploads, kept once made: every upload would
/// otherwise create one event and destroy it (two driver calls, each
/// taking the driver's lock) and a warm step makes two uploads.
#[derive(Debug, Default)]
struct EventPool(Mutex<Vec<CudaEvent>>);

impl EventPool {
    /// More than a step's uploads can hold at once; events beyond it are
    /// destroyed when their fence drops.
    const KEPT: usize = 64;

    /// A kept event, or a new one of `gpu`'s context.
    fn take(&self, gpu: &Gpu) -> Result<CudaEvent, DeviceError> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner).pop();
        match kept {
            Some(event) => Ok(event),
            None => gpu.context().new_event(None).map_err(drv_err),
        }
    }

    fn give_back(&self, event: CudaEvent) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < Self::KEPT {
            kept.push(event);
        }
    }
}

/// The end of a [`CudaBackend`] upload: an event recorded behind the copy,
/// back to the backend's pool when the fence drops. Recording an event
/// again replaces what it waited for, so one whose copy may still run is
/// safe to hand out once nobody holds its fence.
#[derive(Debug)]
struct CudaFence {
    event: Option<CudaEvent>,
    pool: Arc<EventPool>,
}

impl DeviceFence for CudaFence {
    fn wait(&self) -> Result<(), DeviceError> {
        match &self.event {
            Some(event) => event.synchronize().map_err(drv_err),
            None => Ok(()),
        }
    }
}

impl Drop for CudaFence {
    fn drop(&mut self) {
        if let Some(event) = self.event.take() {
            self.pool.give_back(event);
        }
    }
}

/// Device memory of a [`CudaBackend`]: its own, or another library's
/// adopted through DLPack ([`DeviceBackend::adopt`]).
pub struct CudaBuffer {
    /// Dropped by `Drop`: freed if the memory is ours, let go if not.
    slice: ManuallyDrop<CudaSlice<u8>>,
    len: usize,
    /// The other library's hold on adopted memory, dropped (giving the
    /// memory back) after the slice lets go of it.
    owner: Option<Box<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBuffer")
            .field("len", &self.len)
            .field("adopted", &self.owner.is_some())
            .finish()
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        // SAFETY: the slice is taken once, here, and never used after.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        match self.owner.take() {
            Some(owner) => {
                // Not ours to free: cudarc lets go of the address, then the
                // owner gives it back to the library it came from.
                slice.leak();
                drop(owner);
            }
            None => drop(slice),
        }
    }
}

impl CudaBuffer {
    /// A buffer owning `slice`'s memory, re-typed as bytes, freed on
    /// `stream` when the buffer drops.
    pub(crate) fn owning<T: cudarc::driver::DeviceRepr>(
        slice: CudaSlice<T>,
        stream: &Arc<CudaStream>,
    ) -> Self {
        let len = slice.len() * size_of::<T>();
        let address = slice.leak();
        // SAFETY: `address` is `len` bytes of this context's memory that
        // `slice` owned and let go of: the new slice is its only owner.
        let slice = unsafe { stream.upgrade_device_ptr::<u8>(address, len) };
        Self {
            slice: ManuallyDrop::new(slice),
            len,
            owner: None,
        }
    }

    /// The first `n` elements as an owned `CudaSlice<T>` freed on
    /// `stream`, where the memory is the buffer's own; the buffer back
    /// where it is another library's (adopted through DLPack).
    pub(crate) fn into_slice<T: cudarc::driver::DeviceRepr>(
        mut self,
        n: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<CudaSlice<T>, Self> {
        if self.owner.is_some() || n * size_of::<T>() > self.len {
            return Err(self);
        }
        // SAFETY: taken once; `self` is forgotten below, so Drop does not
        // take it again (and has nothing else to release: no owner).
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        std::mem::forget(self);
        let address = slice.leak();
        // SAFETY: the buffer owned these bytes and let go of them; `n`
        // elements of `T` fit in them (checked above).
        Ok(unsafe { stream.upgrade_device_ptr::<T>(address, n) })
    }
}

impl DeviceBuffer for CudaBuffer {
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

impl CudaBuffer {
    /// The first `n` elements as `T`.
    pub fn view<T: bytemuck::Pod>(&self, n: usize) -> Result<CudaView<'_, T>, DeviceError> {
        // SAFETY: the buffer holds plain bytes and T is Pod, so any bit
        // pattern is a valid T; transmute checks the length fits.
        unsafe { self.slice.transmute::<T>(n) }.ok_or_else(|| too_short(n, self.len))
    }

    /// The first `n` elements as `T`, writable.
    pub fn view_mut<T: bytemuck::Pod>(
        &mut self,
        n: usize,
    ) -> Result<CudaViewMut<'_, T>, DeviceError> {
        let len = self.len;
        // SAFETY: as in `view`.
        unsafe { self.slice.transmute_mut::<T>(n) }.ok_or_else(|| too_short(n, len))
    }
}

/// The first `n` elements of a blob's device memory under a read guard
/// (`gpu_data`, `gpu_diff`), as a CUDA view; an error if the memory is not
/// this backend's or is too small.
pub fn view<'a, T: bytemuck::Pod>(
    guard: &'a crate::DeviceRead<'_>,
    n: usize,
) -> Result<CudaView<'a, T>, DeviceError> {
    mine(&**guard)?.view(n)
}

/// As [`view`], writable, under a write guard (`mutable_gpu_data`,
/// `mutable_gpu_diff`).
pub fn view_mut<'a, T: bytemuck::Pod>(
    guard: &'a mut crate::DeviceWrite<'_>,
    n: usize,
) -> Result<CudaViewMut<'a, T>, DeviceError> {
    mine_mut(&mut **guard)?.view_mut(n)
}

fn mine(b: &dyn DeviceBuffer) -> Result<&CudaBuffer, DeviceError> {
    own_buffer(b, "this CUDA device")
}

fn mine_mut(b: &mut dyn DeviceBuffer) -> Result<&mut CudaBuffer, DeviceError> {
    own_buffer_mut(b, "this CUDA device")
}

impl DeviceBackend for CudaBackend {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> String {
        format!(
            "cuda:{} ({})",
            self.gpu.context().ordinal(),
            self.gpu.name()
        )
    }

    fn alloc_zeroed(&self, bytes: usize) -> Result<Box<dyn DeviceBuffer>, DeviceError> {
        // A zero-byte allocation is not a valid CUDA allocation; keep one
        // byte and report the length asked for.
        let slice = self
            .gpu
            .stream()
            .alloc_zeros::<u8>(bytes.max(1))
            .map_err(drv_err)?;
        Ok(Box::new(CudaBuffer {
            slice: ManuallyDrop::new(slice),
            len: bytes,
            owner: None,
        }))
    }

    fn dlpack_device(&self) -> Option<(u32, i32)> {
        let ordinal = i32::try_from(self.gpu.context().ordinal()).ok()?;
        Some((2, ordinal)) // kDLCUDA
    }

    fn device_address(&self, buffer: &dyn DeviceBuffer) -> Result<u64, DeviceError> {
        // Event tracking is off (`Gpu::new`): reading the address records
        // and waits for nothing.
        let (address, _) = mine(buffer)?.slice.device_ptr(self.gpu.stream());
        Ok(address)
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        self.gpu.stream().synchronize().map_err(drv_err)
    }

    unsafe fn adopt(
        &self,
        address: u64,
        len: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Result<Box<dyn DeviceBuffer>, DeviceError> {
        // SAFETY: the caller promises `len` bytes of this device's memory
        // at `address` until `owner` drops; the buffer's Drop leaks the
        // slice (no cuMemFree) before dropping `owner`.
        let slice = unsafe { self.gpu.stream().upgrade_device_ptr::<u8>(address, len) };
        Ok(Box::new(CudaBuffer {
            slice: ManuallyDrop::new(slice),
            len,
            owner: Some(owner),
        }))
    }

    /// Pinned (page-locked) host memory, zero-filled, freed by
    /// `cuMemFreeHost` with this device's context bound to the freeing
    /// thread (Caffe issues 3053, 3640).
    fn alloc_host(&self, bytes: usize) -> Result<HostBuffer, DeviceError> {
        crate::check_host_room("pin host memory", bytes)
            .map_err(|e| DeviceError::with_source("host allocation", e))?;
        let ctx = self.gpu.context().clone();
        ctx.bind_to_thread().map_err(drv_err)?;
        let size = bytes.max(1);
        // SAFETY: cuMemHostAlloc returns page-aligned memory of `size`
        // bytes or an error; the context is bound to this thread.
        let raw = unsafe {
            cudarc::driver::result::malloc_host(size, cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE)
        }
        .map_err(drv_err)?;
        let ptr = NonNull::new(raw.cast::<u8>())
            .ok_or_else(|| DeviceError::new("cuMemHostAlloc returned null"))?;
        if !(ptr.as_ptr() as usize).is_multiple_of(HOST_ALIGN) {
            return Err(DeviceError::new("pinned memory is not 64-byte aligned"));
        }
        // SAFETY: `ptr` is valid for `size >= bytes` bytes, owned here.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, size) };
        let release = move |p: NonNull<u8>, _len: usize| {
            if ctx.bind_to_thread().is_ok() {
                // SAFETY: p came from cuMemHostAlloc in this context and is
                // freed once, by the HostBuffer that owns it.
                let _ = unsafe { cudarc::driver::result::free_host(p.as_ptr().cast()) };
            }
        };
        // SAFETY: pinned memory valid for `bytes` bytes, zeroed, 64-byte
        // aligned (checked), freed only by `release`.
        Ok(unsafe { HostBuffer::from_raw_parts(ptr, bytes, release) })
    }

    fn upload(&self, src: &[u8], dst: &mut dyn DeviceBuffer) -> Result<(), DeviceError> {
        // SAFETY: `src` is borrowed for this call, which returns only once
        // the fence says the copy has read it.
        match unsafe { self.start_upload(src, dst) }? {
            Some(copied) => copied.wait(),
            None => Ok(()),
        }
    }

    /// Queued on the device's stream, with an event recorded behind it:
    /// the host goes on queueing work while the bytes travel. A GPU reads
    /// pinned memory (a blob's host side here) while the copy runs, so the
    /// caller keeps it unwritten until the fence is done; pageable memory
    /// the driver stages before it returns.
    unsafe fn start_upload(
        &self,
        src: &[u8],
        dst: &mut dyn DeviceBuffer,
    ) -> Result<Option<Box<dyn DeviceFence>>, DeviceError> {
        let dst = mine_mut(dst)?;
        if src.is_empty() {
            return Ok(None);
        }
        let mut view = dst.view_mut::<u8>(src.len())?;
        let stream = self.gpu.stream();
        stream.memcpy_htod(src, &mut view).map_err(drv_err)?;
        let copied = self.upload_events.take(&self.gpu)?;
        copied.record(stream).map_err(drv_err)?;
        Ok(Some(Box::new(CudaFence {
            event: Some(copied),
            pool: self.upload_events.clone(),
        })))
    }

    fn zero(&self, bytes: usize, x: &mut dyn DeviceBuffer) -> Result<(), DeviceError> {
        let x = mine_mut(x)?;
        if bytes == 0 {
            return Ok(());
        }
        let mut view = x.view_mut::<u8>(bytes)?;
        self.gpu.stream().memset_zeros(&mut view).map_err(drv_err)
    }

    fn download(&self, src: &dyn DeviceBuffer, dst: &mut [u8]) -> Result<(), DeviceError> {
        let src = mine(src)?;
        if dst.is_empty() {
            return Ok(());
        }
        let view = src.view::<u8>(dst.len())?;
        let stream = self.gpu.stream();
        stream.memcpy_dtoh(&view, dst).map_err(drv_err)?;
        stream.synchronize().map_err(drv_err)
    }

    fn upload_async(
        &self,
        src: &[u8],
        dst: &mut dyn DeviceBuffer,
        stream: &dyn DeviceStream,
    ) -> Result<(), DeviceError> {
        let s = stream
            .as_any()
            .downcast_ref::<CudaStreamHandle>()
            .ok_or_else(|| DeviceError::new("not a stream of this CUDA device"))?;
        let dst = mine_mut(dst)?;
        if src.is_empty() {
            return Ok(());
        }
        let mut view = dst.view_mut::<u8>(src.len())?;
        // What the device's stream queued first (the buffer's allocation
        // and zero fill, earlier writes) happens before the push: cudarc's
        // event tracking is off (`Gpu::new`).
        s.0.join(self.gpu.stream()).map_err(drv_err)?;
        s.0.memcpy_htod(src, &mut view).map_err(drv_err)
    }

    fn copy(
        &self,
        bytes: usize,
        src: &dyn DeviceBuffer,
        dst: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError> {
        if bytes == 0 {
            return Ok(());
        }
        let src = mine(src)?;
        let dst = mine_mut(dst)?;
        let from = src.view::<u8>(bytes)?;
        let mut to = dst.view_mut::<u8>(bytes)?;
        self.gpu
            .stream()
            .memcpy_dtod(&from, &mut to)
            .map_err(drv_err)
    }

    fn axpy(
        &self,
        p: Precision,
        n: usize,
        alpha: f64,
        x: &dyn DeviceBuffer,
        y: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError> {
        let (x, y) = (mine(x)?, mine_mut(y)?);
        match p {
            Precision::F32 => {
                self.gpu
                    .axpy(alpha as f32, &x.view::<f32>(n)?, &mut y.view_mut::<f32>(n)?)
            }
            Precision::F64 => self
                .gpu
                .axpy(alpha, &x.view::<f64>(n)?, &mut y.view_mut::<f64>(n)?),
        }
        .map_err(dev_err)
    }

    fn scal(
        &self,
        p: Precision,
        n: usize,
        alpha: f64,
        x: &mut dyn DeviceBuffer,
    ) -> Result<(), DeviceError> {
        let x = mine_mut(x)?;
        match p {
            Precision::F32 => self.gpu.scal(alpha as f32, &mut x.view_mut::<f32>(n)?),
            Precision::F64 => self.gpu.scal(alpha, &mut x.view_mut::<f64>(n)?),
        }
        .map_err(dev_err)
    }

    fn asum(&self, p: Precision, n: usize, x: &dyn DeviceBuffer) -> Result<f64, DeviceError> {
        let x = mine(x)?;
        match p {
            Precision::F32 => self.gpu.asum(&x.view::<f32>(n)?).map(f64::from),
            Precision::F64 => self.gpu.asum(&x.view::<f64>(n)?),
        }
        .map_err(dev_err)
    }

    fn dot(
        &self,
        p: Precision,
        n: usize,
        x: &dyn DeviceBuffer,
        y: &dyn DeviceBuffer,
    ) -> Result<f64, DeviceError> {
        let (x, y) = (mine(x)?, mine(y)?);
        match p {
            Precision::F32 => self
                .gpu
                .dot(&x.view::<f32>(n)?, &y.view::<f32>(n)?)
                .map(f64::from),
            Precision::F64 => self.gpu.dot(&x.view::<f64>(n)?, &y.view::<f64>(n)?),
        }
        .map_err(dev_err)
    }
}
