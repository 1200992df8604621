//! `Blob<T>`: Caffe's N-D array with data and diff, dynamic shape.
//!
//! Split by concern: construction and reshape here, shape queries and
//! offsets in [`shape`], memory accessors and sharing in [`memory`], math in
//! [`math`].

#[cfg(feature = "burn")]
mod burn;
#[cfg(feature = "candle")]
mod candle;
#[cfg(feature = "cuda")]
mod cuda_slice;
#[cfg(feature = "dlpack")]
mod dlpack;
mod math;
mod memory;
mod shape;
mod vec;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

#[cfg(feature = "dlpack")]
pub use dlpack::DlpackAccess;
pub use memory::{CpuMut, CpuRef};
pub use shape::shape_string;

use crate::device::DeviceBackend;
use crate::element::Element;
use crate::error::{BlobError, Result};
use crate::head::Head;
use crate::synced_memory::SyncedMemory;

/// Caffe's `kMaxBlobAxes`.
pub const MAX_BLOB_AXES: usize = 32;

/// An N-D array of `T` with a data and a diff buffer, each a
/// [`SyncedMemory`] (Caffe `Blob<Dtype>`).
///
/// Buffers are allocated lazily and zero-filled on first touch. Reshape only
/// reallocates when the new count exceeds the capacity, as in Caffe; memory
/// kept after a shrink is released by [`Blob::shrink_to_fit`]. Counts are
/// `usize`, so blobs over 2^31 elements work.
///
/// ```
/// use blob_runtime::Blob;
/// let mut b = Blob::<f32>::new(&[2, 3, 4, 5])?;
/// assert_eq!(b.count(), 120);
/// assert_eq!(b.shape_string(), "2 3 4 5 (120)");
/// b.mutable_cpu_data()?.fill(1.0);
/// b.mutable_cpu_diff()?.fill(0.25);
/// b.update()?; // data -= diff
/// assert_eq!(b.cpu_data()?[0], 0.75);
/// b.reshape(&[10, 12])?; // same count: contents kept, no allocation
/// assert_eq!(b.data_at(&[9, 11]), 0.75);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct Blob<T: Element> {
    data: Arc<SyncedMemory>,
    diff: Arc<SyncedMemory>,
    shape: Vec<usize>,
    count: usize,
    device: Option<Arc<dyn DeviceBackend>>,
    _element: PhantomData<T>,
}

impl<T: Element> Default for Blob<T> {
    /// A blob with no axes, count 0 and no memory (Caffe `Blob()`).
    fn default() -> Self {
        Self::empty(None)
    }
}

impl<T: Element> Blob<T> {
    fn empty(device: Option<Arc<dyn DeviceBackend>>) -> Self {
        let none = Arc::new(SyncedMemory::new(0));
        Self {
            data: none.clone(),
            diff: none,
            shape: Vec::new(),
            count: 0,
            device,
            _element: PhantomData,
        }
    }

    /// A blob of `shape` on the CPU (Caffe `Blob(shape)`); memory is
    /// allocated on first touch.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f64>::new(&[0, 5]).unwrap();
    /// assert_eq!(b.count(), 0);
    /// assert!(blob_runtime::Blob::<f32>::new(&[2; 33]).is_err());
    /// ```
    pub fn new(shape: &[usize]) -> Result<Self> {
        let mut b = Self::empty(None);
        b.reshape(shape)?;
        Ok(b)
    }

    /// A 4-axis blob (Caffe `Blob(num, channels, height, width)`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::from_nchw(2, 3, 4, 5).unwrap();
    /// assert_eq!(b.shape(), &[2, 3, 4, 5]);
    /// ```
    pub fn from_nchw(num: usize, channels: usize, height: usize, width: usize) -> Result<Self> {
        Self::new(&[num, channels, height, width])
    }

    /// A blob of `shape` whose memory can also live on `device`.
    ///
    /// ```no_run
    /// # fn gpu() -> std::sync::Arc<dyn blob_runtime::DeviceBackend> { unimplemented!() }
    /// let b = blob_runtime::Blob::<f32>::with_device(&[64, 10], gpu())?;
    /// let on_gpu = b.gpu_data()?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn with_device(shape: &[usize], device: Arc<dyn DeviceBackend>) -> Result<Self> {
        let mut b = Self::empty(Some(device));
        b.reshape(shape)?;
        Ok(b)
    }

    /// The device this blob's memory can live on, if any.
    ///
    /// ```
    /// assert!(blob_runtime::Blob::<f32>::new(&[1]).unwrap().device().is_none());
    /// ```
    pub fn device(&self) -> Option<&Arc<dyn DeviceBackend>> {
        self.device.as_ref()
    }

    /// Puts this blob on `device`: a blob of the same shape there takes
    /// its place, with the data and the diff copied (what was never
    /// written stays unallocated). How a net is moved to a GPU: every
    /// parameter and activation, then the layers run where their blobs
    /// live. A blob sharing memory with another (`share_data`) stops
    /// sharing. Already on `device`: nothing changes.
    ///
    /// ```
    /// // On a GPU: `blob_runtime::cuda::CudaBackend::new(0)?` (feature `cuda`).
    /// let device = blob_runtime::host_device::HostDevice::new();
    /// let mut w = blob_runtime::Blob::<f32>::new(&[20, 1, 5, 5])?;
    /// w.mutable_cpu_data()?.fill(0.5);
    /// w.move_to(device)?;
    /// assert!(w.device().is_some());
    /// assert_eq!(w.data_at(&[0, 0, 0, 0]), 0.5);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn move_to(&mut self, device: Arc<dyn DeviceBackend>) -> Result<()> {
        if self
            .device
            .as_ref()
            .is_some_and(|d| Arc::ptr_eq(d, &device))
        {
            return Ok(());
        }
        let mut fresh = Self::with_device(&self.shape, device)?;
        if self.data_head() != Head::Uninitialized {
            fresh.copy_from(self, false)?;
        }
        if self.diff_head() != Head::Uninitialized {
            fresh.copy_from(self, true)?;
        }
        *self = fresh;
        Ok(())
    }

    fn new_memory(&self, count: usize) -> Arc<SyncedMemory> {
        let bytes = count * size_of::<T>();
        Arc::new(match &self.device {
            Some(d) => SyncedMemory::with_device(bytes, d.clone()),
            None => SyncedMemory::new(bytes),
        })
    }

    /// Changes the shape (Caffe `Reshape`). Grow-only: when the new count
    /// exceeds [`capacity`](Self::capacity), data and diff are replaced by
    /// fresh zero-filled buffers (old contents are lost, as in Caffe);
    /// otherwise buffers, contents and heads are kept and reinterpreted.
    ///
    /// ```
    /// let mut b = blob_runtime::Blob::<f32>::new(&[4])?;
    /// b.mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
    /// b.reshape(&[2, 2])?; // within capacity: kept
    /// assert_eq!(b.data_at(&[1, 0]), 3.0);
    /// b.reshape(&[1])?;    // shrink: capacity stays 4
    /// assert_eq!(b.capacity(), 4);
    /// let err = b.reshape(&[usize::MAX, 2]).unwrap_err();
    /// assert!(err.to_string().contains("overflows"));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn reshape(&mut self, shape: &[usize]) -> Result<()> {
        let count = checked_count::<T>("reshape", shape)?;
        self.shape.clear();
        self.shape.extend_from_slice(shape);
        self.count = count;
        if count > self.capacity() {
            self.data = self.new_memory(count);
            self.diff = self.new_memory(count);
        }
        Ok(())
    }

    /// 4-axis reshape (Caffe `Reshape(num, channels, height, width)`).
    ///
    /// ```
    /// let mut b = blob_runtime::Blob::<f32>::default();
    /// b.reshape_nchw(1, 2, 3, 4).unwrap();
    /// assert_eq!(b.count(), 24);
    /// ```
    pub fn reshape_nchw(
        &mut self,
        num: usize,
        channels: usize,
        height: usize,
        width: usize,
    ) -> Result<()> {
        self.reshape(&[num, channels, height, width])
    }

    /// Takes `other`'s shape (Caffe `ReshapeLike`).
    ///
    /// ```
    /// let a = blob_runtime::Blob::<f32>::new(&[3, 2]).unwrap();
    /// let mut b = blob_runtime::Blob::<f64>::default();
    /// b.reshape_like(&a).unwrap();
    /// assert_eq!(b.shape(), &[3, 2]);
    /// ```
    pub fn reshape_like<U: Element>(&mut self, other: &Blob<U>) -> Result<()> {
        self.reshape(other.shape())
    }

    /// Elements the current buffers hold: reshapes up to this count allocate
    /// nothing. Derived from the buffers themselves, so after
    /// [`share_data`](Self::share_data) with a smaller blob it is that
    /// blob's size: a later reshape never writes past a shared buffer
    /// (unlike Caffe, issue 5439).
    ///
    /// ```
    /// let mut b = blob_runtime::Blob::<f32>::new(&[10]).unwrap();
    /// b.reshape(&[3]).unwrap();
    /// assert_eq!(b.capacity(), 10);
    /// ```
    pub fn capacity(&self) -> usize {
        self.data.size().min(self.diff.size()) / size_of::<T>()
    }

    /// Releases memory kept from a larger shape: data and diff are moved to
    /// buffers of exactly `count()` elements, contents kept. Buffers shared
    /// with other blobs are left to them; this blob gets its own copy.
    ///
    /// ```
    /// let mut b = blob_runtime::Blob::<f32>::new(&[1000])?;
    /// b.mutable_cpu_data()?[1] = 5.0;
    /// b.reshape(&[2])?;
    /// b.shrink_to_fit()?;
    /// assert_eq!(b.capacity(), 2);
    /// assert_eq!(b.cpu_data()?[1], 5.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn shrink_to_fit(&mut self) -> Result<()> {
        if self.capacity() == self.count && self.data.size() == self.diff.size() {
            return Ok(());
        }
        let data = self.moved_copy(&self.data)?;
        let diff = self.moved_copy(&self.diff)?;
        self.data = data;
        self.diff = diff;
        Ok(())
    }

    fn moved_copy(&self, from: &Arc<SyncedMemory>) -> Result<Arc<SyncedMemory>> {
        let to = self.new_memory(self.count);
        if from.head() != Head::Uninitialized {
            let bytes = self.count * size_of::<T>();
            let src = from.cpu_data()?;
            to.mutable_cpu_data()?.copy_from_slice(&src[..bytes]);
        }
        Ok(to)
    }

    /// The head of the data buffer (Caffe `data()->head()`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// assert_eq!(b.data_head(), blob_runtime::Head::Uninitialized);
    /// b.cpu_data().unwrap();
    /// assert_eq!(b.data_head(), blob_runtime::Head::AtCpu);
    /// ```
    pub fn data_head(&self) -> Head {
        self.data.head()
    }

    /// The head of the diff buffer (Caffe `diff()->head()`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// assert_eq!(b.diff_head(), blob_runtime::Head::Uninitialized);
    /// ```
    pub fn diff_head(&self) -> Head {
        self.diff.head()
    }

    /// The data memory (Caffe `data()`), shared by [`share_data`](Self::share_data).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2]).unwrap();
    /// assert_eq!(b.data().size(), 8);
    /// ```
    pub fn data(&self) -> &Arc<SyncedMemory> {
        &self.data
    }

    /// The diff memory (Caffe `diff()`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f64>::new(&[2]).unwrap();
    /// assert_eq!(b.diff().size(), 16);
    /// ```
    pub fn diff(&self) -> &Arc<SyncedMemory> {
        &self.diff
    }
}

/// The product of `shape`, refusing over 32 axes and any overflow of the
/// element count or of its size in bytes.
pub(crate) fn checked_count<T>(op: &'static str, shape: &[usize]) -> Result<usize> {
    if shape.len() > MAX_BLOB_AXES {
        return Err(BlobError::TooManyAxes {
            op,
            shape: shape.to_vec(),
            axes: shape.len(),
        });
    }
    let overflow = || BlobError::CountOverflow {
        op,
        shape: shape.to_vec(),
    };
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(overflow)?;
    count
        .checked_mul(size_of::<T>().max(1))
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(overflow)?;
    Ok(count)
}

impl<T: Element> fmt::Debug for Blob<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Blob")
            .field("element", &T::NAME)
            .field("shape", &self.shape_string())
            .field("capacity", &self.capacity())
            .field("data_head", &self.data.head())
            .field("diff_head", &self.diff.head())
            .finish()
    }
}
