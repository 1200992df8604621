//! ndarray views of blobs (feature `ndarray`): a blob's host data seen as
//! an `ArrayView` of its shape, and arrays taken in as blobs.
//!
//! ```
//! use blob_runtime::{Blob, blob};
//! let b = Blob::<f32>::from_vec(&[2, 3], (0..6).map(|i| i as f32).collect())?;
//! let column_sums = b.with_array(|a| a.sum_axis(ndarray::Axis(0)))?;
//! assert_eq!(column_sums.as_slice().unwrap(), &[3.0, 5.0, 7.0]);
//!
//! // A typed blob's view has the fixed dimension type of its rank.
//! let t = <blob!(f32; 2, 2)>::new()?;
//! t.with_array_mut(|mut a: ndarray::ArrayViewMut2<f32>| a[[1, 0]] = 5.0)?;
//! assert_eq!(t.data_at([1, 0]), 5.0);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

use ndarray::{
    Array, ArrayD, ArrayView, ArrayViewD, ArrayViewMut, ArrayViewMutD, Dimension, Ix1, Ix2, Ix3,
    Ix4, Ix5, Ix6, IxDyn,
};

use crate::blob::Blob;
use crate::element::Element;
use crate::error::Result;
use crate::typed::{Dim, DimList, Shape, TypedBlob};

const HOLDS_COUNT: &str = "a blob's host data holds count() elements of its shape";

impl<T: Element> Blob<T> {
    /// Runs `f` on an ndarray view of the data, synchronised to the host.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f64>::from_vec(&[2, 2], vec![1.0, 2.0, 3.0, 4.0])?;
    /// assert_eq!(b.with_array(|a| a[[1, 0]])?, 3.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn with_array<R>(&self, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> Result<R> {
        let data = self.cpu_data()?;
        Ok(f(
            ArrayView::from_shape(IxDyn(self.shape()), &data).expect(HOLDS_COUNT)
        ))
    }

    /// Runs `f` on a writable ndarray view of the data (head moves to CPU).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 2])?;
    /// b.with_array_mut(|mut a| a.fill(2.0))?;
    /// assert_eq!(b.asum_data()?, 8.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn with_array_mut<R>(&self, f: impl FnOnce(ArrayViewMutD<'_, T>) -> R) -> Result<R> {
        let mut data = self.mutable_cpu_data()?;
        let shape = IxDyn(self.shape());
        Ok(f(
            ArrayViewMut::from_shape(shape, &mut data).expect(HOLDS_COUNT)
        ))
    }

    /// A copy of the data as an owned array of the blob's shape.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[3, 1])?;
    /// assert_eq!(b.to_array()?.shape(), &[3, 1]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_array(&self) -> Result<ArrayD<T>> {
        self.with_array(|a| a.to_owned())
    }

    /// A blob of the array's shape and values. A standard-layout array
    /// whose data starts at its allocation is adopted without a copy (as
    /// [`Blob::from_vec`]); any other (transposed, sliced) is copied in
    /// row-major order.
    ///
    /// ```
    /// let a = ndarray::array![[1.0f32, 2.0], [3.0, 4.0]];
    /// let b = blob_runtime::Blob::from_array(a.t().to_owned())?;
    /// assert_eq!(b.shape(), &[2, 2]);
    /// assert_eq!(b.to_vec()?, vec![1.0, 3.0, 2.0, 4.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn from_array<D: Dimension>(array: Array<T, D>) -> Result<Self> {
        let shape = array.shape().to_vec();
        let array = if array.is_standard_layout() {
            array
        } else {
            array.as_standard_layout().into_owned()
        };
        match array.into_raw_vec_and_offset() {
            (values, Some(0) | None) => Self::from_vec(&shape, values),
            (values, Some(offset)) => {
                let count = shape.iter().product::<usize>();
                Self::from_vec(&shape, values[offset..offset + count].to_vec())
            }
        }
    }
}

/// The ndarray dimension type of a dim list's rank: `Ix4` for four axes.
pub trait NdRank: DimList {
    /// `Ix1` to `Ix6`.
    type Ix: Dimension;
}

macro_rules! nd_rank {
    ($ix:ident; $($d:ident),+) => {
        impl<$($d: Dim),+> NdRank for ($($d,)+) {
            type Ix = $ix;
        }
    };
}
nd_rank!(Ix1; A);
nd_rank!(Ix2; A, B);
nd_rank!(Ix3; A, B, C);
nd_rank!(Ix4; A, B, C, E);
nd_rank!(Ix5; A, B, C, E, F);
nd_rank!(Ix6; A, B, C, E, F, G);

type RankIx<S> = <<S as Shape>::Dims as NdRank>::Ix;

impl<T: Element, S: Shape> TypedBlob<T, S> {
    /// A typed blob of the array's shape and values, the shape checked
    /// against the type's static dims (its run-time dim, the batch, taken
    /// from the array); adopted without a copy where
    /// [`Blob::from_array`] can.
    ///
    /// ```
    /// use blob_runtime::blob;
    /// type Pairs = blob!(f32; _, 2);
    /// let b = Pairs::from_array(ndarray::array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]])?;
    /// assert_eq!((b.shape(), b.data_at([2, 1])), (&[3, 2][..], 6.0));
    /// let err = Pairs::from_array(ndarray::Array2::<f32>::zeros((2, 3))).unwrap_err();
    /// assert!(err.to_string().contains("dim 1 is 3, the type says 2"), "{err}");
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn from_array<D: Dimension>(array: Array<T, D>) -> Result<Self> {
        let shape = array.shape().to_vec();
        crate::typed::blob::check::<S>(&shape)?;
        Ok(Blob::from_array(array)?
            .try_into_static()
            .expect("the shape was checked above"))
    }
}

impl<T: Element, S: Shape> TypedBlob<T, S>
where
    S::Dims: NdRank,
{
    /// Runs `f` on a view of the data with the fixed dimension type of the
    /// shape's rank (`ArrayView4` for `(N, C, H, W)`).
    ///
    /// ```
    /// let b = <blob_runtime::blob!(f32; 1, 2, 2, 2)>::new()?;
    /// let dims = b.with_array(|a: ndarray::ArrayView4<f32>| a.dim())?;
    /// assert_eq!(dims, (1, 2, 2, 2));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn with_array<R>(&self, f: impl FnOnce(ArrayView<'_, T, RankIx<S>>) -> R) -> Result<R> {
        self.as_dyn().with_array(|a| {
            f(a.into_dimensionality()
                .expect("the type's rank is the blob's"))
        })
    }

    /// Runs `f` on a writable view with the fixed dimension type of the
    /// shape's rank.
    ///
    /// ```
    /// let b = <blob_runtime::blob!(f32; 3)>::new()?;
    /// b.with_array_mut(|mut a: ndarray::ArrayViewMut1<f32>| a[2] = 1.0)?;
    /// assert_eq!(b.to_vec()?, vec![0.0, 0.0, 1.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn with_array_mut<R>(
        &self,
        f: impl FnOnce(ArrayViewMut<'_, T, RankIx<S>>) -> R,
    ) -> Result<R> {
        self.as_dyn().with_array_mut(|a| {
            f(a.into_dimensionality()
                .expect("the type's rank is the blob's"))
        })
    }
}
