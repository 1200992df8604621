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
}
