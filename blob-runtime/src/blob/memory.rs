//! Memory accessors, element reads, sharing, zero-copy swap and copy.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::Blob;
use crate::device::DeviceBuffer;
use crate::element::Element;
use crate::error::{BlobError, Result};
use crate::head::Head;
use crate::host_buffer::HostBuffer;
use crate::synced_memory::{DeviceRead, DeviceWrite, HostRead, HostWrite, SyncedMemory};

/// A read guard on a blob's host elements; derefs to `[T]` of `count()`
/// elements. While it lives, writes to the same memory are refused.
pub struct CpuRef<'a, T> {
    guard: HostRead<'a>,
    len: usize,
    _t: PhantomData<&'a [T]>,
}

impl<T: Element> Deref for CpuRef<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        &bytemuck::cast_slice(&self.guard)[..self.len]
    }
}

/// A write guard on a blob's host elements; derefs to `[T]` of `count()`
/// elements. While it lives, any other access to the same memory is
/// refused.
pub struct CpuMut<'a, T> {
    guard: HostWrite<'a>,
    len: usize,
    _t: PhantomData<&'a mut [T]>,
}

impl<T: Element> Deref for CpuMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        &bytemuck::cast_slice(&self.guard)[..self.len]
    }
}

impl<T: Element> DerefMut for CpuMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        if self.len == 0 {
            return &mut [];
        }
        &mut bytemuck::cast_slice_mut(&mut self.guard)[..self.len]
    }
}

fn read<T: Element>(mem: &SyncedMemory, count: usize) -> Result<CpuRef<'_, T>> {
    let guard = if mem.size() == 0 {
        HostRead::empty()
    } else {
        mem.cpu_data()?
    };
    Ok(CpuRef {
        guard,
        len: count,
        _t: PhantomData,
    })
}

fn write<T: Element>(mem: &SyncedMemory, count: usize) -> Result<CpuMut<'_, T>> {
    Ok(CpuMut {
        guard: mem.mutable_cpu_data()?,
        len: count,
        _t: PhantomData,
    })
}

impl<T: Element> Blob<T> {
    /// Reads the data on the host, syncing from the device if it is newer
    /// (Caffe `cpu_data()`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[3]).unwrap();
    /// assert_eq!(&*b.cpu_data().unwrap(), &[0.0, 0.0, 0.0]);
    /// ```
    pub fn cpu_data(&self) -> Result<CpuRef<'_, T>> {
        read(&self.data, self.count)
    }

    /// Reads the diff on the host (Caffe `cpu_diff()`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f64>::new(&[2]).unwrap();
    /// assert_eq!(&*b.cpu_diff().unwrap(), &[0.0, 0.0]);
    /// ```
    pub fn cpu_diff(&self) -> Result<CpuRef<'_, T>> {
        read(&self.diff, self.count)
    }

    /// Writes the data on the host; the head moves to CPU (Caffe
    /// `mutable_cpu_data()`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<i32>::new(&[2]).unwrap();
    /// b.mutable_cpu_data().unwrap().copy_from_slice(&[4, 5]);
    /// assert_eq!(b.data_at(&[1]), 5);
    /// ```
    pub fn mutable_cpu_data(&self) -> Result<CpuMut<'_, T>> {
        write(&self.data, self.count)
    }

    /// Writes the diff on the host (Caffe `mutable_cpu_diff()`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// b.mutable_cpu_diff().unwrap()[0] = 1.5;
    /// assert_eq!(b.diff_at(&[0]), 1.5);
    /// ```
    pub fn mutable_cpu_diff(&self) -> Result<CpuMut<'_, T>> {
        write(&self.diff, self.count)
    }

    /// Reads the data on the device (Caffe `gpu_data()`); an error without
    /// a device.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// assert!(b.gpu_data().is_err()); // CPU-only blob
    /// ```
    pub fn gpu_data(&self) -> Result<DeviceRead<'_>> {
        self.data.gpu_data()
    }

    /// Reads the diff on the device (Caffe `gpu_diff()`).
    ///
    /// ```
    /// assert!(blob_runtime::Blob::<f32>::new(&[2]).unwrap().gpu_diff().is_err());
    /// ```
    pub fn gpu_diff(&self) -> Result<DeviceRead<'_>> {
        self.diff.gpu_data()
    }

    /// Writes the data on the device (Caffe `mutable_gpu_data()`).
    ///
    /// ```
    /// assert!(blob_runtime::Blob::<f32>::new(&[2]).unwrap().mutable_gpu_data().is_err());
    /// ```
    pub fn mutable_gpu_data(&self) -> Result<DeviceWrite<'_>> {
        self.data.mutable_gpu_data()
    }

    /// Writes the diff on the device (Caffe `mutable_gpu_diff()`).
    ///
    /// ```
    /// assert!(blob_runtime::Blob::<f32>::new(&[2]).unwrap().mutable_gpu_diff().is_err());
    /// ```
    pub fn mutable_gpu_diff(&self) -> Result<DeviceWrite<'_>> {
        self.diff.mutable_gpu_data()
    }

    /// The dims as `i32` on the device (Caffe `gpu_shape()`, which CUDA
    /// kernels read): a fresh memory synced to the device. An error for a
    /// blob without a device or with a dim over `i32::MAX`.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3]).unwrap();
    /// assert!(b.gpu_shape().is_err()); // CPU-only blob
    /// ```
    pub fn gpu_shape(&self) -> Result<Arc<SyncedMemory>> {
        let op = "gpu_shape";
        let device = self.device.clone().ok_or(BlobError::NoDevice { op })?;
        let dims: Vec<i32> = self
            .shape
            .iter()
            .map(|&d| i32::try_from(d))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| BlobError::InvalidProtoShape {
                shape: self.shape.iter().map(|&d| d as i64).collect(),
                detail: "a dim exceeds i32, which the device shape holds".into(),
            })?;
        let mem = SyncedMemory::with_device(dims.len() * size_of::<i32>(), device);
        if !dims.is_empty() {
            mem.mutable_cpu_data()?
                .copy_from_slice(bytemuck::cast_slice(&dims));
        }
        drop(mem.gpu_data()?);
        Ok(Arc::new(mem))
    }

    /// One data element (Caffe `data_at`), syncing to the host.
    ///
    /// # Panics
    /// When the index is out of bounds, or the data is borrowed for writing
    /// elsewhere, as indexing a slice panics; the message names index and
    /// shape. [`try_data_at`](Self::try_data_at) returns either as an
    /// error instead.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 2]).unwrap();
    /// b.mutable_cpu_data().unwrap()[3] = 1.0;
    /// assert_eq!(b.data_at(&[1, 1]), 1.0);
    /// ```
    #[track_caller]
    pub fn data_at(&self, index: &[usize]) -> T {
        let off = self.offset(index);
        let data = self.cpu_data().unwrap_or_else(|e| panic!("{e}"));
        data[off]
    }

    /// One diff element (Caffe `diff_at`).
    ///
    /// # Panics
    /// As [`data_at`](Self::data_at).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// assert_eq!(b.diff_at(&[1]), 0.0);
    /// ```
    #[track_caller]
    pub fn diff_at(&self, index: &[usize]) -> T {
        let off = self.offset(index);
        let diff = self.cpu_diff().unwrap_or_else(|e| panic!("{e}"));
        diff[off]
    }

    /// [`data_at`](Self::data_at) without a panic: an index out of
    /// bounds, or the data borrowed for writing (on another thread, say),
    /// is the error.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// let writing = b.mutable_cpu_data()?;
    /// assert!(matches!(b.try_data_at(&[1]), Err(blob_runtime::BlobError::Borrowed { .. })));
    /// drop(writing);
    /// assert_eq!(b.try_data_at(&[1])?, 0.0);
    /// assert!(b.try_data_at(&[2]).is_err());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn try_data_at(&self, index: &[usize]) -> Result<T> {
        let off = self.try_offset(index)?;
        Ok(self.cpu_data()?[off])
    }

    /// [`diff_at`](Self::diff_at) without a panic, as
    /// [`try_data_at`](Self::try_data_at).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// assert_eq!(b.try_diff_at(&[0])?, 0.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn try_diff_at(&self, index: &[usize]) -> Result<T> {
        let off = self.try_offset(index)?;
        Ok(self.cpu_diff()?[off])
    }

    /// Makes this blob's data the same memory as `other`'s (Caffe
    /// `ShareData`); counts must be equal. The memory is reference-counted,
    /// so either blob may be dropped first, and the run-time borrow flag
    /// keeps aliasing safe across threads.
    ///
    /// ```
    /// let a = blob_runtime::Blob::<f32>::new(&[2, 3]).unwrap();
    /// let mut b = blob_runtime::Blob::<f32>::new(&[6]).unwrap();
    /// b.share_data(&a).unwrap();
    /// a.mutable_cpu_data().unwrap()[5] = 2.0;
    /// assert_eq!(b.data_at(&[5]), 2.0);
    /// ```
    pub fn share_data(&mut self, other: &Blob<T>) -> Result<()> {
        self.check_share("share data", other)?;
        self.data = Arc::clone(&other.data);
        Ok(())
    }

    /// Makes this blob's data `memory`, which holds at least its count
    /// and lives on its device: a memory no blob reads any more, given
    /// to another ([`Net::reuse_memory`] in blob-layers). Caffe's
    /// `ShareData` takes a blob; this takes the memory itself, which may
    /// be larger. A later reshape past the memory gives the blob its own.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use blob_runtime::{Blob, SyncedMemory};
    /// let pool = Arc::new(SyncedMemory::new(64));
    /// let mut b = Blob::<f32>::new(&[4])?;
    /// b.share_data_memory(&pool)?;
    /// b.mutable_cpu_data()?.fill(2.0);
    /// assert_eq!(&pool.cpu_data()?[..4], &2.0f32.to_ne_bytes());
    /// assert!(Blob::<f32>::new(&[17])?.share_data_memory(&pool).is_err()); // too small
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    ///
    /// [`Net::reuse_memory`]: https://docs.rs/blob-layers/latest/blob_layers/net/struct.Net.html#method.reuse_memory
    pub fn share_data_memory(&mut self, memory: &Arc<SyncedMemory>) -> Result<()> {
        let op = "share a memory as a blob's data";
        let need = self.count * size_of::<T>();
        if memory.size() < need {
            return Err(BlobError::CountMismatch {
                op,
                what: format!("bytes of the memory for shape {}", self.shape_string()),
                got: memory.size(),
                want: need,
            });
        }
        let same_device = match (memory.device(), &self.device) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if !same_device {
            return Err(BlobError::InvalidParameter {
                op,
                detail: "the memory lives on another device than the blob".into(),
            });
        }
        self.data = Arc::clone(memory);
        Ok(())
    }

    /// Makes this blob's diff the same memory as `other`'s (Caffe
    /// `ShareDiff`).
    ///
    /// ```
    /// let a = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// let mut b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// b.share_diff(&a).unwrap();
    /// assert!(std::sync::Arc::ptr_eq(a.diff(), b.diff()));
    /// ```
    pub fn share_diff(&mut self, other: &Blob<T>) -> Result<()> {
        self.check_share("share diff", other)?;
        self.diff = Arc::clone(&other.diff);
        Ok(())
    }

    fn check_share(&self, op: &'static str, other: &Blob<T>) -> Result<()> {
        if self.count != other.count {
            return Err(BlobError::CountMismatch {
                op,
                what: format!("source blob of shape {}", other.shape_string()),
                got: other.count,
                want: self.count,
            });
        }
        Ok(())
    }

    /// Swaps `buffer` in as the data without copying (Caffe `set_cpu_data`,
    /// used for zero-copy batch prefetch) and returns the previous host
    /// buffer for reuse. `buffer` must hold exactly `count()` elements; if
    /// the data memory is larger (after a shrinking reshape), data and diff
    /// are first replaced by memory of exactly that size, so capacity stays
    /// honest.
    ///
    /// ```
    /// use blob_runtime::{Blob, HostBuffer};
    /// let mut b = Blob::<f32>::new(&[2])?;
    /// b.set_cpu_data(HostBuffer::from_slice(&[1.0f32, 2.0])?)?;
    /// assert_eq!(&*b.cpu_data()?, &[1.0, 2.0]);
    /// assert!(b.set_cpu_data(HostBuffer::from_slice(&[1.0f32])?).is_err());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn set_cpu_data(&mut self, buffer: HostBuffer) -> Result<Option<HostBuffer>> {
        self.prepare_set("set_cpu_data", buffer.len())?;
        self.data.set_cpu_data(buffer)
    }

    /// Swaps a device buffer in as the data (Caffe `set_gpu_data`); rules as
    /// for [`set_cpu_data`](Self::set_cpu_data).
    ///
    /// ```
    /// # #[derive(Debug)] struct B; impl blob_runtime::DeviceBuffer for B {
    /// #   fn len(&self) -> usize { 8 }
    /// #   fn as_any(&self) -> &dyn std::any::Any { self }
    /// #   fn as_any_mut(&mut self) -> &mut dyn std::any::Any { self } }
    /// let mut b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// assert!(b.set_gpu_data(Box::new(B)).is_err()); // no device attached
    /// ```
    pub fn set_gpu_data(
        &mut self,
        buffer: Box<dyn DeviceBuffer>,
    ) -> Result<Option<Box<dyn DeviceBuffer>>> {
        self.prepare_set("set_gpu_data", buffer.len())?;
        self.data.set_gpu_data(buffer)
    }

    fn prepare_set(&mut self, op: &'static str, bytes: usize) -> Result<()> {
        let want = self.count * size_of::<T>();
        if bytes != want {
            return Err(BlobError::CountMismatch {
                op,
                what: "the new buffer (bytes)".into(),
                got: bytes,
                want,
            });
        }
        if self.data.size() != want {
            self.data = self.new_memory(self.count);
            self.diff = self.new_memory(self.count);
        }
        Ok(())
    }

    /// Copies `source`'s data (or diff, with `copy_diff`) into this blob
    /// of the same shape: Caffe `CopyFrom(source, copy_diff)` (its
    /// `reshape` left false), the same call as
    /// [`TypedBlob::copy_from`](crate::typed::TypedBlob::copy_from), where
    /// the compiler checks the shapes. A blob of another shape is an
    /// error naming both; [`copy_from_reshaping`](Self::copy_from_reshaping)
    /// takes the source's shape first. The copy runs on the device when
    /// the source's newest copy is there and both blobs live on that
    /// device, else through the host.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// let src = Blob::<f32>::new(&[2, 2])?;
    /// src.mutable_cpu_data()?.fill(3.0);
    /// let mut dst = Blob::<f32>::new(&[2, 2])?;
    /// dst.copy_from(&src, false)?;
    /// assert_eq!(dst.data_at(&[1, 1]), 3.0);
    /// assert!(Blob::<f32>::default().copy_from(&src, false).is_err());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn copy_from(&mut self, source: &Blob<T>, copy_diff: bool) -> Result<()> {
        if source.shape != self.shape || source.count != self.count {
            return Err(BlobError::ShapeMismatch {
                op: "copy",
                src: source.shape_string(),
                dst: self.shape_string(),
            });
        }
        self.copy_same_shape(source, copy_diff)
    }

    /// Takes `source`'s shape, then copies its data (or diff) in: Caffe
    /// `CopyFrom(source, copy_diff, /*reshape=*/true)`.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// let src = Blob::<f32>::new(&[2, 2])?;
    /// src.mutable_cpu_data()?.fill(3.0);
    /// let mut dst = Blob::<f32>::default();
    /// dst.copy_from_reshaping(&src, false)?;
    /// assert_eq!((dst.shape(), dst.data_at(&[1, 1])), (&[2, 2][..], 3.0));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn copy_from_reshaping(&mut self, source: &Blob<T>, copy_diff: bool) -> Result<()> {
        if source.shape != self.shape || source.count != self.count {
            self.reshape_like(source)?;
        }
        self.copy_same_shape(source, copy_diff)
    }

    fn copy_same_shape(&mut self, source: &Blob<T>, copy_diff: bool) -> Result<()> {
        let (src, dst) = if copy_diff {
            (&source.diff, &self.diff)
        } else {
            (&source.data, &self.data)
        };
        if Arc::ptr_eq(src, dst) || self.count == 0 {
            return Ok(());
        }
        let bytes = self.count * size_of::<T>();
        // A device-side copy needs both buffers on one device; between two
        // devices the bytes go through the host.
        let same_device = match (src.device(), dst.device()) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if src.head() == Head::AtGpu && same_device {
            let from = src.gpu_data()?;
            let mut to = dst.mutable_gpu_data()?;
            let backend = to.backend().clone();
            backend
                .copy(bytes, &*from, &mut *to)
                .map_err(|source| BlobError::Device { op: "copy", source })
        } else {
            let from = read::<T>(src, self.count)?;
            let mut to = write::<T>(dst, self.count)?;
            blob_kernels::cpu::copy(&from, &mut to);
            Ok(())
        }
    }
}

impl<T: Element> std::fmt::Debug for CpuRef<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Element> std::fmt::Debug for CpuMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
