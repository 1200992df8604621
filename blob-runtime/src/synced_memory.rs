//! Caffe's `SyncedMemory`: one logical buffer with a host side, a device
//! side, and a head saying which side holds the newest bytes.
//!
//! Transitions follow Caffe's table exactly (see [`SyncedMemory`]). Each
//! side is allocated, zero-filled, on first need and then kept.
//!
//! Caffe's "const" reads mutate the sync state, so every accessor takes
//! `&self` and returns a guard. A run-time borrow flag (any number of read
//! guards, or one write guard) makes aliasing through [`std::sync::Arc`]
//! shared memory safe from any thread: a conflicting request is an error,
//! [`BlobError::Borrowed`], never a wait and never undefined behaviour.
//! A write refused because read guards are alive refuses new readers on
//! other threads for a moment (2 ms, renewed by each refused try), so a
//! writer that tries again gets in as soon as the guards alive go, however
//! steadily others read; a writer that would rather wait than retry waits,
//! bounded, with [`SyncedMemory::wait_writable`] (or
//! [`Blob::update_within`](crate::Blob::update_within)), which refuses new
//! readers while it waits.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crate::device::{DeviceBackend, DeviceBuffer, DeviceFence, DeviceStream};
use crate::error::{BlobError, Result};
use crate::head::Head;
use crate::host_buffer::HostBuffer;

/// How long a refused write keeps readers on other threads out: long
/// enough for a writer's next try, short enough that a writer that gave
/// up delays no reader noticeably.
const WRITE_INTENT: Duration = Duration::from_millis(2);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Borrow {
    Free,
    Read(usize),
    Write,
}

/// A device buffer held by raw pointer, so that the guards' references into
/// it never overlap a live `Box` (which would assert uniqueness).
struct DevBox(NonNull<dyn DeviceBuffer>);

// SAFETY: DevBox owns a `Box<dyn DeviceBuffer>` and DeviceBuffer is Send.
unsafe impl Send for DevBox {}
// SAFETY: DeviceBuffer is Sync; mutation goes through the borrow flag.
unsafe impl Sync for DevBox {}

impl DevBox {
    fn new(b: Box<dyn DeviceBuffer>) -> Self {
        Self(NonNull::from(Box::leak(b)))
    }
    fn into_box(self) -> Box<dyn DeviceBuffer> {
        let p = self.0;
        std::mem::forget(self);
        // SAFETY: the pointer came from Box::leak in `new` and is released
        // exactly once (here or in Drop, never both: `forget` above).
        unsafe { Box::from_raw(p.as_ptr()) }
    }
}

impl Drop for DevBox {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::leak and no guard outlives the
        // SyncedMemory that owns this DevBox.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

struct State {
    head: Head,
    host: Option<HostBuffer>,
    dev: Option<DevBox>,
    borrow: Borrow,
    /// A writer waits for the guards alive to go: new readers are
    /// refused meanwhile, so that they cannot keep it out for ever.
    writer_waiting: bool,
    /// A write refused because read guards were alive, by which thread,
    /// and until when: readers on other threads are refused until then,
    /// so a writer that tries again gets in as soon as the guards alive
    /// go, however steadily other threads read.
    write_intent: Option<(ThreadId, Instant)>,
    /// An upload that may still be reading the host bytes: waited for
    /// before they are written, replaced or freed.
    upload: Option<Box<dyn DeviceFence>>,
    /// See [`SyncedMemory::write_stamp`].
    stamp: u64,
    /// Leases alive ([`HostLease`]): a refusal then says where the
    /// memory went.
    lent: usize,
}

/// A stamp no memory has had before: one counter for the process, so
/// that stamps also tell memories apart.
fn fresh_stamp() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl State {
    /// Waits until no upload reads the host bytes any more.
    fn finish_upload(&mut self, op: &'static str) -> Result<()> {
        if let Some(fence) = self.upload.take() {
            fence
                .wait()
                .map_err(|source| BlobError::Device { op, source })?;
        }
        Ok(())
    }
}

impl Drop for State {
    fn drop(&mut self) {
        // The host buffer is freed after this: an upload must not read it
        // then. A failed wait means a failed device, whose queued work
        // no longer runs.
        let _ = self.finish_upload("drop");
    }
}

/// One buffer of `size` bytes mirrored between host and device (Caffe
/// `SyncedMemory`).
///
/// | call | Uninitialized | AtCpu | AtGpu | Synced |
/// |---|---|---|---|---|
/// | [`cpu_data`](Self::cpu_data) | alloc+zero, AtCpu | AtCpu | D2H, Synced | Synced |
/// | [`mutable_cpu_data`](Self::mutable_cpu_data) | alloc+zero, AtCpu | AtCpu | D2H, AtCpu | AtCpu |
/// | [`gpu_data`](Self::gpu_data) | dev alloc+zero, AtGpu | H2D, Synced | AtGpu | Synced |
/// | [`mutable_gpu_data`](Self::mutable_gpu_data) | dev alloc+zero, AtGpu | H2D, AtGpu | AtGpu | AtGpu |
/// | [`set_cpu_data`](Self::set_cpu_data) | AtCpu | AtCpu | AtCpu | AtCpu |
/// | [`set_gpu_data`](Self::set_gpu_data) | AtGpu | AtGpu | AtGpu | AtGpu |
/// | [`async_gpu_push`](Self::async_gpu_push) | error | async H2D, Synced | error | error |
///
/// An H2D returns once the copy is queued where the backend can
/// ([`DeviceBackend::start_upload`]; CUDA from pinned memory), not once it
/// is done, as Caffe's does: the host goes on queueing work. Anything that
/// would change the host bytes first waits for the copy
/// ([`mutable_cpu_data`](Self::mutable_cpu_data), a D2H into them,
/// [`set_cpu_data`](Self::set_cpu_data), drop), so what the device gets
/// is what the host held at the upload.
///
/// ```
/// use blob_runtime::{Head, SyncedMemory};
/// let mem = SyncedMemory::new(10);
/// assert_eq!(mem.head(), Head::Uninitialized);
/// mem.mutable_cpu_data().unwrap()[3] = 7;
/// assert_eq!(mem.head(), Head::AtCpu);
/// assert_eq!(mem.cpu_data().unwrap()[3], 7);
/// // No device attached: GPU access is an error, not a panic.
/// assert!(mem.gpu_data().is_err());
/// ```
pub struct SyncedMemory {
    size: usize,
    backend: Option<Arc<dyn DeviceBackend>>,
    state: Mutex<State>,
    /// Signalled when the last guard goes.
    freed: Condvar,
}

impl SyncedMemory {
    /// Memory of `size` bytes with no device side; nothing is allocated until
    /// first use (Caffe `SyncedMemory(size)`).
    ///
    /// ```
    /// assert_eq!(blob_runtime::SyncedMemory::new(10).size(), 10);
    /// ```
    pub fn new(size: usize) -> Self {
        Self::build(size, None)
    }

    /// Memory of `size` bytes that can also live on `backend`'s device.
    /// Host memory is then allocated by the backend (pinned for CUDA).
    ///
    /// ```no_run
    /// # fn get_backend() -> std::sync::Arc<dyn blob_runtime::DeviceBackend> { unimplemented!() }
    /// let mem = blob_runtime::SyncedMemory::with_device(10, get_backend());
    /// let dev = mem.gpu_data()?; // device alloc + zero
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn with_device(size: usize, backend: Arc<dyn DeviceBackend>) -> Self {
        Self::build(size, Some(backend))
    }

    fn build(size: usize, backend: Option<Arc<dyn DeviceBackend>>) -> Self {
        Self {
            size,
            backend,
            state: Mutex::new(State {
                head: Head::Uninitialized,
                host: None,
                dev: None,
                borrow: Borrow::Free,
                writer_waiting: false,
                write_intent: None,
                upload: None,
                stamp: fresh_stamp(),
                lent: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// Waits, at most `timeout`, until no guard is alive, refusing new
    /// read guards meanwhile (a writer under a steady stream of readers
    /// would otherwise be refused for as long as they read). Returns
    /// whether the memory is free; the next write guard taken, or this
    /// call timing out, lets readers in again.
    ///
    /// ```
    /// use std::time::Duration;
    /// let mem = blob_runtime::SyncedMemory::new(4);
    /// let read = mem.cpu_data()?;
    /// assert!(!mem.wait_writable(Duration::from_millis(10)));
    /// drop(read);
    /// assert!(mem.wait_writable(Duration::from_millis(10)));
    /// mem.mutable_cpu_data()?.fill(1);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn wait_writable(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        st.writer_waiting = true;
        while st.borrow != Borrow::Free {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                st.writer_waiting = false;
                return false;
            }
            st = self
                .freed
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Lets readers in again after a [`wait_writable`](Self::wait_writable)
    /// whose write did not happen.
    pub(crate) fn stop_waiting(&self) {
        self.lock().writer_waiting = false;
    }

    /// Size in bytes (Caffe `size()`).
    ///
    /// ```
    /// assert_eq!(blob_runtime::SyncedMemory::new(3).size(), 3);
    /// ```
    pub fn size(&self) -> usize {
        self.size
    }

    /// The current head (Caffe `head()`).
    ///
    /// ```
    /// let m = blob_runtime::SyncedMemory::new(3);
    /// assert_eq!(m.head(), blob_runtime::Head::Uninitialized);
    /// ```
    pub fn head(&self) -> Head {
        self.lock().head
    }

    /// The device backend, if this memory has one.
    ///
    /// ```
    /// assert!(blob_runtime::SyncedMemory::new(3).device().is_none());
    /// ```
    pub fn device(&self) -> Option<&Arc<dyn DeviceBackend>> {
        self.backend.as_ref()
    }

    /// A number that changes whenever the bytes may have changed: each
    /// write guard taken ([`mutable_cpu_data`](Self::mutable_cpu_data),
    /// [`mutable_gpu_data`](Self::mutable_gpu_data)) and each buffer set
    /// gives a new one, and no two memories ever share one. A layer keeps
    /// what it derived from a blob (a convolution its weights' Winograd
    /// transform) for as long as the stamp it was made at holds. Reads,
    /// and the copies between host and device, leave it as it is.
    ///
    /// ```
    /// let m = blob_runtime::SyncedMemory::new(4);
    /// let before = m.write_stamp();
    /// let _ = m.cpu_data()?;
    /// assert_eq!(m.write_stamp(), before);
    /// m.mutable_cpu_data()?[0] = 1;
    /// assert_ne!(m.write_stamp(), before);
    /// assert_ne!(blob_runtime::SyncedMemory::new(4).write_stamp(), m.write_stamp());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn write_stamp(&self) -> u64 {
        self.lock().stamp
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is only changed by this module, which leaves it
        // consistent before any call that could panic; a poisoned lock is
        // therefore still valid.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn backend(&self, op: &'static str) -> Result<&Arc<dyn DeviceBackend>> {
        self.backend.as_ref().ok_or(BlobError::NoDevice { op })
    }

    fn acquire(st: &mut State, op: &'static str, write: bool) -> Result<()> {
        if !write && st.writer_waiting {
            return Err(BlobError::Borrowed {
                op,
                held: "a writer is waiting for the guards alive to go",
            });
        }
        if !write && let Some((writer, until)) = st.write_intent {
            if Instant::now() >= until {
                st.write_intent = None;
            } else if writer != std::thread::current().id() {
                return Err(BlobError::Borrowed {
                    op,
                    held: "a writer on another thread is waiting for the read guards alive to go",
                });
            }
        }
        st.borrow = match (st.borrow, write) {
            (Borrow::Free, false) => Borrow::Read(1),
            (Borrow::Read(n), false) => Borrow::Read(n + 1),
            (Borrow::Free, true) => {
                st.writer_waiting = false;
                st.write_intent = None;
                st.stamp = fresh_stamp();
                Borrow::Write
            }
            (Borrow::Write, _) => {
                return Err(BlobError::Borrowed {
                    op,
                    held: Self::held(st, "a write guard is alive"),
                });
            }
            (Borrow::Read(_), true) => {
                st.write_intent =
                    Some((std::thread::current().id(), Instant::now() + WRITE_INTENT));
                return Err(BlobError::Borrowed {
                    op,
                    held: Self::held(st, "a read guard is alive"),
                });
            }
        };
        Ok(())
    }

    /// What a refusal says holds the memory: a lease where one is alive
    /// (its guard is in another library), else `guard`.
    fn held(st: &State, guard: &'static str) -> &'static str {
        if st.lent > 0 {
            "it is lent through DLPack until the consumer deletes its tensor"
        } else {
            guard
        }
    }

    fn release(&self) {
        let mut st = self.lock();
        st.borrow = match st.borrow {
            Borrow::Read(n) if n > 1 => Borrow::Read(n - 1),
            _ => Borrow::Free,
        };
        if st.borrow == Borrow::Free && st.writer_waiting {
            self.freed.notify_all();
        }
    }

    fn ensure_host(&self, st: &mut State, op: &'static str) -> Result<()> {
        if st.host.is_none() {
            let buf = match &self.backend {
                Some(b) => b
                    .alloc_host(self.size)
                    .map_err(|source| BlobError::Device { op, source })?,
                None => HostBuffer::zeroed(self.size)?,
            };
            st.host = Some(buf);
        }
        Ok(())
    }

    fn ensure_dev(&self, st: &mut State, op: &'static str) -> Result<()> {
        if st.dev.is_none() {
            let b = self.backend(op)?;
            let buf = b
                .alloc_zeroed(self.size)
                .map_err(|source| BlobError::Device { op, source })?;
            st.dev = Some(DevBox::new(buf));
        }
        Ok(())
    }

    /// Caffe `to_cpu()`.
    fn to_cpu(&self, st: &mut State, op: &'static str) -> Result<()> {
        match st.head {
            Head::Uninitialized => {
                self.ensure_host(st, op)?;
                st.head = Head::AtCpu;
            }
            Head::AtGpu => {
                self.ensure_host(st, op)?;
                st.finish_upload(op)?;
                let backend = self.backend(op)?;
                let dev = st
                    .dev
                    .as_ref()
                    .expect("head at GPU implies a device buffer");
                let host = st.host.as_mut().expect("allocated above");
                // SAFETY: dev points to a live buffer owned by `st`; no write
                // guard exists (checked by the caller), so a shared reference
                // is sound alongside any read guards.
                let src = unsafe { dev.0.as_ref() };
                backend
                    .download(src, host.as_bytes_mut())
                    .map_err(|source| BlobError::Device { op, source })?;
                st.head = Head::Synced;
            }
            Head::AtCpu | Head::Synced => {}
        }
        Ok(())
    }

    /// Caffe `to_gpu()`.
    fn to_gpu(&self, st: &mut State, op: &'static str) -> Result<()> {
        let backend = self.backend(op)?;
        match st.head {
            Head::Uninitialized => {
                self.ensure_dev(st, op)?;
                st.head = Head::AtGpu;
            }
            Head::AtCpu => {
                self.ensure_dev(st, op)?;
                st.finish_upload(op)?;
                let host = st.host.as_ref().expect("head at CPU implies a host buffer");
                let dev = st.dev.as_mut().expect("allocated above");
                // SAFETY: head at CPU means no device guard was handed out
                // since the device copy went stale (device guards need head
                // AtGpu/Synced, and moving head to CPU needs no borrows), so
                // this is the only reference to the device buffer.
                let dst = unsafe { dev.0.as_mut() };
                // SAFETY: the host buffer is written, replaced or freed
                // only after `finish_upload` (mutable_cpu_data, to_cpu,
                // set_cpu_data, drop), which waits on this fence.
                let fence = unsafe { backend.start_upload(host.as_bytes(), dst) }
                    .map_err(|source| BlobError::Device { op, source })?;
                st.upload = fence;
                st.head = Head::Synced;
            }
            Head::AtGpu | Head::Synced => {}
        }
        Ok(())
    }

    /// Caffe's `cpu_data()` (or, with `write`, `mutable_cpu_data()`)
    /// up to the pointer: the head moved, the borrow flag taken. The
    /// caller hands out a guard (or a lease) that releases it.
    fn borrow_host(&self, op: &'static str, write: bool) -> Result<NonNull<u8>> {
        let mut st = self.lock();
        if write {
            Self::check_free(&mut st, op)?;
        } else {
            Self::check_not_written(&st, op)?;
        }
        self.to_cpu(&mut st, op)?;
        if write {
            st.finish_upload(op)?;
            st.head = Head::AtCpu;
        }
        Self::acquire(&mut st, op, write)?;
        Ok(st
            .host
            .as_ref()
            .expect("to_cpu allocates the host buffer")
            .as_ptr())
    }

    /// The host bytes lent past the life of any reference to this memory
    /// (to a DLPack consumer): read, or with `write` written, as
    /// [`cpu_data`](Self::cpu_data) and
    /// [`mutable_cpu_data`](Self::mutable_cpu_data) would, and borrowed so
    /// until the lease drops, on whichever thread.
    #[cfg(feature = "dlpack")]
    pub(crate) fn lease_host(mem: &Arc<Self>, write: bool) -> Result<HostLease> {
        let op = if write {
            "lend the host bytes for writing"
        } else {
            "lend the host bytes for reading"
        };
        let ptr = mem.borrow_host(op, write)?;
        mem.lock().lent += 1;
        Ok(HostLease {
            mem: Arc::clone(mem),
            ptr,
        })
    }

    /// Reads the host copy, syncing from the device first if the device is
    /// newer (Caffe `cpu_data()`).
    ///
    /// ```
    /// let m = blob_runtime::SyncedMemory::new(4);
    /// assert_eq!(&*m.cpu_data().unwrap(), &[0, 0, 0, 0]); // zero-filled
    /// ```
    pub fn cpu_data(&self) -> Result<HostRead<'_>> {
        let ptr = self.borrow_host("cpu_data", false)?;
        // SAFETY: the host buffer lives as long as self, is never replaced
        // or freed while a borrow is held (set_*/drop need Borrow::Free),
        // and no writer exists while Borrow::Read is held.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), self.size) };
        Ok(HostRead {
            mem: Some(self),
            bytes,
        })
    }

    /// Writes the host copy; the head moves to CPU (Caffe
    /// `mutable_cpu_data()`).
    ///
    /// ```
    /// let m = blob_runtime::SyncedMemory::new(2);
    /// m.mutable_cpu_data().unwrap().copy_from_slice(&[1, 2]);
    /// assert_eq!(m.head(), blob_runtime::Head::AtCpu);
    /// ```
    pub fn mutable_cpu_data(&self) -> Result<HostWrite<'_>> {
        let ptr = self.borrow_host("mutable_cpu_data", true)?;
        // SAFETY: as in cpu_data, and Borrow::Write makes this the only
        // reference to the host bytes until the guard drops.
        let bytes = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), self.size) };
        Ok(HostWrite { mem: self, bytes })
    }

    /// Reads the device copy, syncing from the host first if the host is
    /// newer (Caffe `gpu_data()`).
    ///
    /// ```
    /// let m = blob_runtime::SyncedMemory::new(2);
    /// let err = m.gpu_data().unwrap_err();
    /// assert!(err.to_string().contains("no GPU device"));
    /// ```
    pub fn gpu_data(&self) -> Result<DeviceRead<'_>> {
        let buf = self.borrow_device("gpu_data", false)?;
        // SAFETY: the device buffer is neither replaced nor freed while a
        // borrow is held, and no writer exists while Borrow::Read is held.
        let buf = unsafe { buf.as_ref() };
        Ok(DeviceRead { mem: self, buf })
    }

    /// Writes the device copy; the head moves to GPU (Caffe
    /// `mutable_gpu_data()`).
    ///
    /// ```
    /// let m = blob_runtime::SyncedMemory::new(2);
    /// assert!(m.mutable_gpu_data().is_err()); // no device attached
    /// ```
    pub fn mutable_gpu_data(&self) -> Result<DeviceWrite<'_>> {
        let mut buf = self.borrow_device("mutable_gpu_data", true)?;
        // SAFETY: Borrow::Write makes this the only reference until the
        // guard drops; the buffer is not replaced while it is held.
        let buf = unsafe { buf.as_mut() };
        Ok(DeviceWrite { mem: self, buf })
    }

    /// Caffe's `gpu_data()` (or, with `write`, `mutable_gpu_data()`) up
    /// to the buffer: the head moved, the borrow flag taken. The caller
    /// hands out a guard (or a lease) that releases it.
    fn borrow_device(&self, op: &'static str, write: bool) -> Result<NonNull<dyn DeviceBuffer>> {
        let mut st = self.lock();
        if write {
            Self::check_free(&mut st, op)?;
        } else {
            Self::check_not_written(&st, op)?;
        }
        self.to_gpu(&mut st, op)?;
        if write {
            st.head = Head::AtGpu;
        }
        Self::acquire(&mut st, op, write)?;
        Ok(st
            .dev
            .as_ref()
            .expect("to_gpu allocates the device buffer")
            .0)
    }

    /// The device buffer lent past the life of any reference to this
    /// memory, as [`lease_host`](Self::lease_host) lends the host bytes.
    #[cfg(feature = "dlpack")]
    pub(crate) fn lease_device(mem: &Arc<Self>, write: bool) -> Result<DeviceLease> {
        let op = if write {
            "lend the device memory for writing"
        } else {
            "lend the device memory for reading"
        };
        let buffer = mem.borrow_device(op, write)?;
        mem.lock().lent += 1;
        Ok(DeviceLease {
            mem: Arc::clone(mem),
            buffer,
        })
    }

    /// Replaces the host buffer with `buffer` without copying; the head moves
    /// to CPU and the previous host buffer, if any, is handed back for reuse
    /// (Caffe `set_cpu_data`, used to swap prefetched batches in). Ownership
    /// moves in, so the memory cannot dangle (Caffe issues 5799, 3357).
    ///
    /// ```
    /// use blob_runtime::{HostBuffer, SyncedMemory};
    /// let m = SyncedMemory::new(4);
    /// m.set_cpu_data(HostBuffer::from_bytes(&[1, 2, 3, 4]).unwrap()).unwrap();
    /// assert_eq!(&*m.cpu_data().unwrap(), &[1, 2, 3, 4]);
    /// assert!(m.set_cpu_data(HostBuffer::zeroed(3).unwrap()).is_err()); // wrong size
    /// ```
    pub fn set_cpu_data(&self, buffer: HostBuffer) -> Result<Option<HostBuffer>> {
        let op = "set_cpu_data";
        self.check_size(op, "the new host buffer", buffer.len())?;
        let mut st = self.lock();
        Self::check_free(&mut st, op)?;
        st.finish_upload(op)?;
        let old = st.host.replace(buffer);
        st.head = Head::AtCpu;
        st.stamp = fresh_stamp();
        Ok(old)
    }

    /// The host buffer, taken out, where it holds the current values (the
    /// head at CPU or synced) and no guard is alive; `None` otherwise (and
    /// nothing changes). The memory is left uninitialized. For handing a
    /// blob's values out without a copy ([`crate::Blob::into_vec`]).
    pub(crate) fn take_host(&self) -> Option<HostBuffer> {
        let mut st = self.lock();
        if st.borrow != Borrow::Free || !matches!(st.head, Head::AtCpu | Head::Synced) {
            return None;
        }
        // An upload may still be reading the bytes.
        st.finish_upload("take_host").ok()?;
        let host = st.host.take()?;
        st.head = Head::Uninitialized;
        st.stamp = fresh_stamp();
        Some(host)
    }

    /// The device buffer, taken out, where it holds the current values
    /// (the head at GPU or synced) and no guard is alive; `None` otherwise
    /// (and nothing changes). For handing a blob's device memory out
    /// without a copy ([`crate::Blob::into_cuda_slice`]).
    #[cfg(feature = "cuda")]
    pub(crate) fn take_device(&self) -> Option<Box<dyn DeviceBuffer>> {
        let mut st = self.lock();
        if st.borrow != Borrow::Free || !matches!(st.head, Head::AtGpu | Head::Synced) {
            return None;
        }
        let dev = st.dev.take()?;
        st.head = if st.head == Head::Synced {
            Head::AtCpu
        } else {
            Head::Uninitialized
        };
        st.stamp = fresh_stamp();
        Some(dev.into_box())
    }

    /// Replaces the device buffer with `buffer` (which must come from this
    /// memory's backend); the head moves to GPU and the previous device
    /// buffer, if any, is handed back (Caffe `set_gpu_data`).
    ///
    /// ```
    /// # use blob_runtime::SyncedMemory;
    /// // Without a device there is nothing to set.
    /// let m = SyncedMemory::new(4);
    /// # #[derive(Debug)] struct B; impl blob_runtime::DeviceBuffer for B {
    /// #   fn len(&self) -> usize { 4 }
    /// #   fn as_any(&self) -> &dyn std::any::Any { self }
    /// #   fn as_any_mut(&mut self) -> &mut dyn std::any::Any { self } }
    /// assert!(m.set_gpu_data(Box::new(B)).is_err());
    /// ```
    pub fn set_gpu_data(
        &self,
        buffer: Box<dyn DeviceBuffer>,
    ) -> Result<Option<Box<dyn DeviceBuffer>>> {
        let op = "set_gpu_data";
        self.backend(op)?;
        self.check_size(op, "the new device buffer", buffer.len())?;
        let mut st = self.lock();
        Self::check_free(&mut st, op)?;
        let old = st.dev.replace(DevBox::new(buffer));
        st.head = Head::AtGpu;
        st.stamp = fresh_stamp();
        Ok(old.map(DevBox::into_box))
    }

    /// Starts an asynchronous host-to-device copy on `stream` and marks the
    /// memory synced at once (Caffe `async_gpu_push`). The head must be at
    /// CPU. The caller must synchronize the stream before the device copy
    /// is read or the memory dropped, and must not write the host copy
    /// until then.
    ///
    /// ```
    /// # #[derive(Debug)] struct S; impl blob_runtime::DeviceStream for S {
    /// #   fn as_any(&self) -> &dyn std::any::Any { self } }
    /// let m = blob_runtime::SyncedMemory::new(4);
    /// // Head is Uninitialized, not at CPU:
    /// assert!(m.async_gpu_push(&S).is_err());
    /// ```
    pub fn async_gpu_push(&self, stream: &dyn DeviceStream) -> Result<()> {
        let op = "async_gpu_push";
        let backend = self.backend(op)?;
        let mut st = self.lock();
        if st.head != Head::AtCpu {
            return Err(BlobError::WrongHead { op, head: st.head });
        }
        Self::check_free(&mut st, op)?;
        self.ensure_dev(&mut st, op)?;
        let host = st.host.as_ref().expect("head at CPU implies a host buffer");
        let dev = st.dev.as_ref().expect("allocated above");
        // SAFETY: Borrow::Free was checked, so no guard references the
        // device buffer; the lock keeps others out for this call.
        let dst = unsafe { &mut *dev.0.as_ptr() };
        backend
            .upload_async(host.as_bytes(), dst, stream)
            .map_err(|source| BlobError::Device { op, source })?;
        st.head = Head::Synced;
        Ok(())
    }

    fn check_size(&self, op: &'static str, what: &str, got: usize) -> Result<()> {
        if got == self.size {
            Ok(())
        } else {
            Err(BlobError::CountMismatch {
                op,
                what: format!("{what} (bytes)"),
                got,
                want: self.size,
            })
        }
    }

    /// Refuses a write while any guard is alive; one refused for read
    /// guards keeps new readers on other threads out for a moment
    /// ([`WRITE_INTENT`]), so a writer that tries again gets in.
    fn check_free(st: &mut State, op: &'static str) -> Result<()> {
        match st.borrow {
            Borrow::Free => Ok(()),
            Borrow::Read(_) => {
                st.write_intent =
                    Some((std::thread::current().id(), Instant::now() + WRITE_INTENT));
                Err(BlobError::Borrowed {
                    op,
                    held: Self::held(st, "a read guard is alive"),
                })
            }
            Borrow::Write => Err(BlobError::Borrowed {
                op,
                held: Self::held(st, "a write guard is alive"),
            }),
        }
    }

    fn check_not_written(st: &State, op: &'static str) -> Result<()> {
        if st.borrow == Borrow::Write {
            Err(BlobError::Borrowed {
                op,
                held: Self::held(st, "a write guard is alive"),
            })
        } else {
            Ok(())
        }
    }
}

impl fmt::Debug for SyncedMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("SyncedMemory")
            .field("size", &self.size)
            .field("head", &st.head)
            .field("host_allocated", &st.host.is_some())
            .field("device_allocated", &st.dev.is_some())
            .field("device", &self.backend.as_ref().map(|b| b.name()))
            .finish()
    }
}

/// Host bytes lent out by [`SyncedMemory::lease_host`]; dropping it
/// gives the borrow back.
#[cfg(feature = "dlpack")]
pub(crate) struct HostLease {
    mem: Arc<SyncedMemory>,
    ptr: NonNull<u8>,
}

#[cfg(feature = "dlpack")]
impl HostLease {
    /// The first byte; valid for the memory's size while the lease lives.
    pub(crate) fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

// SAFETY: the lease holds a borrow of the memory, not the bytes: it can be
// dropped on any thread (DLPack deleters run on the consumer's), and its
// pointer is only handed to the consumer, never read here.
#[cfg(feature = "dlpack")]
unsafe impl Send for HostLease {}

#[cfg(feature = "dlpack")]
impl Drop for HostLease {
    fn drop(&mut self) {
        self.mem.end_lease();
    }
}

/// The device buffer lent out by [`SyncedMemory::lease_device`];
/// dropping it gives the borrow back.
#[cfg(feature = "dlpack")]
pub(crate) struct DeviceLease {
    mem: Arc<SyncedMemory>,
    buffer: NonNull<dyn DeviceBuffer>,
}

#[cfg(feature = "dlpack")]
impl DeviceLease {
    /// The buffer lent.
    pub(crate) fn buffer(&self) -> &dyn DeviceBuffer {
        // SAFETY: the buffer is neither replaced nor freed while the
        // lease's borrow is held, and the lease only reads its address.
        unsafe { self.buffer.as_ref() }
    }

    /// The backend the buffer belongs to.
    pub(crate) fn backend(&self) -> &Arc<dyn DeviceBackend> {
        self.mem
            .backend
            .as_ref()
            .expect("device memory has a backend")
    }
}

// SAFETY: as for HostLease; DeviceBuffer is Send + Sync.
#[cfg(feature = "dlpack")]
unsafe impl Send for DeviceLease {}

#[cfg(feature = "dlpack")]
impl Drop for DeviceLease {
    fn drop(&mut self) {
        self.mem.end_lease();
    }
}

#[cfg(feature = "dlpack")]
impl SyncedMemory {
    fn end_lease(&self) {
        self.lock().lent -= 1;
        self.release();
    }
}

/// A read guard on host bytes; derefs to `[u8]`.
pub struct HostRead<'a> {
    mem: Option<&'a SyncedMemory>,
    bytes: &'a [u8],
}

impl HostRead<'_> {
    /// A guard over no memory at all (for zero-count blobs).
    pub(crate) fn empty() -> Self {
        Self {
            mem: None,
            bytes: &[],
        }
    }
}

impl Deref for HostRead<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl Drop for HostRead<'_> {
    fn drop(&mut self) {
        if let Some(m) = self.mem {
            m.release();
        }
    }
}

/// A write guard on host bytes; derefs to `[u8]`.
pub struct HostWrite<'a> {
    mem: &'a SyncedMemory,
    bytes: &'a mut [u8],
}

impl Deref for HostWrite<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl DerefMut for HostWrite<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.bytes
    }
}

impl Drop for HostWrite<'_> {
    fn drop(&mut self) {
        self.mem.release();
    }
}

/// A read guard on the device buffer; derefs to the backend's buffer.
pub struct DeviceRead<'a> {
    mem: &'a SyncedMemory,
    buf: &'a dyn DeviceBuffer,
}

impl DeviceRead<'_> {
    /// The backend the buffer belongs to.
    pub fn backend(&self) -> &Arc<dyn DeviceBackend> {
        self.mem
            .backend
            .as_ref()
            .expect("device guards need a backend")
    }
}

impl<'a> Deref for DeviceRead<'a> {
    type Target = dyn DeviceBuffer + 'a;
    fn deref(&self) -> &Self::Target {
        self.buf
    }
}

impl Drop for DeviceRead<'_> {
    fn drop(&mut self) {
        self.mem.release();
    }
}

/// A write guard on the device buffer; derefs to the backend's buffer.
pub struct DeviceWrite<'a> {
    mem: &'a SyncedMemory,
    buf: &'a mut dyn DeviceBuffer,
}

impl DeviceWrite<'_> {
    /// The backend the buffer belongs to.
    pub fn backend(&self) -> &Arc<dyn DeviceBackend> {
        self.mem
            .backend
            .as_ref()
            .expect("device guards need a backend")
    }
}

impl<'a> Deref for DeviceWrite<'a> {
    type Target = dyn DeviceBuffer + 'a;
    fn deref(&self) -> &Self::Target {
        self.buf
    }
}

impl DerefMut for DeviceWrite<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.buf
    }
}

impl Drop for DeviceWrite<'_> {
    fn drop(&mut self) {
        self.mem.release();
    }
}

macro_rules! guard_debug {
    ($($t:ident),*) => {$(
        impl fmt::Debug for $t<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($t)).field("bytes", &self.len()).finish()
            }
        }
    )*};
}
guard_debug!(HostRead, HostWrite, DeviceRead, DeviceWrite);
