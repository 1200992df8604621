//! Data in and out of a blob as a `Vec`: the way to hand values to and from
//! other Rust crates when a slice will not do.

use super::Blob;
use crate::element::Element;
use crate::error::{BlobError, Result};
use crate::host_buffer::HostBuffer;

impl<T: Element> Blob<T> {
    /// A blob of `shape` holding `values`, adopted without a copy: the
    /// `Vec`'s allocation becomes the blob's data (head at CPU), and is
    /// freed as a `Vec` when the blob lets it go. An error, naming both
    /// counts, if `values` does not hold exactly the shape's count.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// let v = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// let at = v.as_ptr();
    /// let b = Blob::from_vec(&[2, 3], v)?;
    /// assert_eq!(b.cpu_data()?.as_ptr(), at); // no copy
    /// assert_eq!(b.data_at(&[1, 0]), 4.0);
    /// let err = Blob::from_vec(&[2, 2], vec![0.0f32; 5]).unwrap_err();
    /// assert_eq!(err.to_string(), "cannot from_vec: the Vec has 5 elements but 4 are needed");
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn from_vec(shape: &[usize], values: Vec<T>) -> Result<Self> {
        let mut blob = Self::new(shape)?;
        if values.len() != blob.count() {
            return Err(BlobError::CountMismatch {
                op: "from_vec",
                what: "the Vec".into(),
                got: values.len(),
                want: blob.count(),
            });
        }
        blob.set_cpu_data(HostBuffer::from_vec(values))?;
        Ok(blob)
    }

    /// A copy of the data, synchronised to the host first (from the GPU if
    /// it is newer there).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f64>::new(&[2])?;
    /// b.mutable_cpu_data()?.copy_from_slice(&[1.5, -2.0]);
    /// assert_eq!(b.to_vec()?, vec![1.5, -2.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_vec(&self) -> Result<Vec<T>> {
        Ok(self.cpu_data()?.to_vec())
    }

    /// The data as a `Vec`, moved out without a copy where the blob
    /// adopted a `Vec<T>` ([`Blob::from_vec`]), shares its data with no
    /// other blob, and its values are current on the host; copied out
    /// otherwise (from a GPU, a shared or a Caffe-allocated buffer). The
    /// diff is dropped.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// let v = vec![1.0f32, 2.0, 3.0];
    /// let at = v.as_ptr();
    /// let mut b = Blob::from_vec(&[3], v)?;
    /// b.mutable_cpu_data()?[0] = 7.0;
    /// let back = b.into_vec()?;
    /// assert_eq!(back, [7.0, 2.0, 3.0]);
    /// assert_eq!(back.as_ptr(), at); // the same memory, moved back out
    /// // A blob allocated by blobflow is copied out.
    /// let c = Blob::<f32>::new(&[2])?;
    /// assert_eq!(c.into_vec()?, [0.0, 0.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Blob::to_vec`] where the values are copied.
    pub fn into_vec(mut self) -> Result<Vec<T>> {
        let count = self.count();
        if let Some(memory) = std::sync::Arc::get_mut(&mut self.data)
            && let Some(host) = memory.take_host()
        {
            match host.into_vec::<T>() {
                Ok(mut v) => {
                    // A blob reshaped smaller keeps its capacity.
                    v.truncate(count);
                    return Ok(v);
                }
                Err(host) => {
                    // Memory blobflow allocated: its bytes, copied.
                    let bytes = &host.as_bytes()[..count * std::mem::size_of::<T>()];
                    // Host buffers are 64-byte aligned: the cast holds.
                    return Ok(bytemuck::cast_slice::<u8, T>(bytes).to_vec());
                }
            }
        }
        self.to_vec()
    }

    /// A copy of the gradient (Caffe's diff), synchronised to the host.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[3])?;
    /// assert_eq!(b.diff_to_vec()?, vec![0.0; 3]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn diff_to_vec(&self) -> Result<Vec<T>> {
        Ok(self.cpu_diff()?.to_vec())
    }

    /// A deep copy: a new blob of the same shape, on the same device, with
    /// copies of the data and the diff (Caffe has no such method; its
    /// `CopyFrom` into a new blob does this). [`Clone`] is this, panicking
    /// where it errs (as `Vec::clone` aborts when memory runs out).
    ///
    /// ```
    /// let a = blob_runtime::Blob::from_vec(&[2], vec![1.0f32, 2.0])?;
    /// let b = a.deep_copy()?;
    /// b.mutable_cpu_data()?[0] = 5.0;
    /// assert_eq!((a.to_vec()?, b.to_vec()?), (vec![1.0, 2.0], vec![5.0, 2.0]));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    ///
    /// # Errors
    /// Out of memory (or over the host memory limit), or a guard of the
    /// blob's memory that excludes reading.
    pub fn deep_copy(&self) -> Result<Self> {
        let mut copy = match self.device() {
            Some(device) => Self::with_device(self.shape(), device.clone())?,
            None => Self::new(self.shape())?,
        };
        copy.copy_from(self, false)?;
        copy.copy_from(self, true)?;
        Ok(copy)
    }
}

impl<T: Element> Clone for Blob<T> {
    /// [`Blob::deep_copy`]: the data and diff copied, never shared (for
    /// sharing, [`Blob::share_data`]).
    ///
    /// # Panics
    /// Where [`Blob::deep_copy`] errs: out of memory, or the blob's memory
    /// held by a write guard.
    fn clone(&self) -> Self {
        self.deep_copy()
            .unwrap_or_else(|e| panic!("Blob::clone: {e}"))
    }
}
