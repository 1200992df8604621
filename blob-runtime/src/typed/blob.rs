//! `TypedBlob<T, S>`: a runtime [`Blob`] whose shape is the type `S`.

use std::any::Any;
use std::marker::PhantomData;
use std::ops::Deref;

use blob_kernels::cpu::{self, Transpose};

use super::relations::{
    FlatOf, Flatten, InnerProductOf, InnerProductWith, LegacyRank, ReshapeInto, SameElement,
    SameShapeAs, ShareWith, StaticShape,
};
use super::shape::{DimList, Shape};
use crate::blob::{Blob, shape_string};
use crate::element::{Element, MathElement};
use crate::error::{BlobError, Result};

/// A typed shape did not match a blob's run-time shape.
///
/// ```
/// use blob_runtime::{Blob, typed::{Shp, D}};
/// use typenum::{U2, U3};
/// let err = Blob::<f32>::new(&[3, 2]).unwrap()
///     .try_into_static::<Shp<(U2, U3), (D<2>, D<3>)>>()
///     .unwrap_err();
/// assert_eq!(err.to_string(), "cannot use a blob of shape 3 2 (6) as 2 3: dim 0 is 3, the type says 2");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot use a blob of shape {found} as {expected}: {detail}")]
pub struct ShapeError {
    /// The blob's shape string.
    pub found: String,
    /// The shape type, described.
    pub expected: String,
    /// The first difference.
    pub detail: String,
}

/// A blob whose shape is a type: dims known at compile time are constants,
/// and operations between blobs check their shapes when the program is
/// compiled. Underneath is an ordinary [`Blob`] (reachable through `Deref`
/// and [`into_dyn`](Self::into_dyn), which cost nothing), so every runtime
/// method is available, and Caffe's memory semantics are unchanged.
///
/// Made with `blob!` in the `blobflow` crate: `blob!(f32; 64, 3, 32, 32)`
/// is `TypedBlob<f32, /* that shape */>`.
///
/// ```
/// use blob_runtime::typed::{Shp, TypedBlob, D};
/// use typenum::{U2, U3};
/// type Two3 = TypedBlob<f32, Shp<(U2, U3), (D<2>, D<3>)>>;
/// let b = Two3::new()?;
/// assert_eq!(Two3::COUNT, 6);
/// b.mutable_cpu_data()?[b.offset([1, 2])] = 7.0;
/// assert_eq!(b.data_at([1, 2]), 7.0);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
// No `S: Shape` bound here: result types such as `FlatOf<S>` must be
// well-formed even when the relation fails, so that the compiler reports
// the relation's own message rather than an unusable method.
pub struct TypedBlob<T: Element, S> {
    blob: Blob<T>,
    _shape: PhantomData<fn() -> S>,
}

impl<T: Element, S: Shape> Deref for TypedBlob<T, S> {
    type Target = Blob<T>;
    fn deref(&self) -> &Blob<T> {
        &self.blob
    }
}

impl<T: Element, S: Shape> std::fmt::Debug for TypedBlob<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedBlob")
            .field("type", &S::describe())
            .field("blob", &self.blob)
            .finish()
    }
}

fn as_same<T: Element, U: Element>(b: &Blob<U>) -> &Blob<T> {
    (b as &dyn Any)
        .downcast_ref::<Blob<T>>()
        .expect("SameElement<T> holds only for U = T")
}

impl<T: Element, S> TypedBlob<T, S> {
    fn wrap(blob: Blob<T>) -> Self {
        Self {
            blob,
            _shape: PhantomData,
        }
    }
}

impl<T: Element, S: Shape> TypedBlob<T, S> {
    /// Number of axes.
    pub const RANK: usize = S::Dims::RANK;
    /// The dims (0 for a dynamic dim).
    pub const DIMS: &'static [usize] = S::Dims::DIMS;
    /// Row-major strides (0 where a dynamic dim hides them).
    pub const STRIDES: &'static [usize] = S::Dims::STRIDES;
    /// Element count of the static dims (the whole count when all are static).
    pub const COUNT: usize = S::Dims::STATIC_COUNT;

    /// A blob of the shape, every dim static (Caffe `Blob(shape)`); memory
    /// is allocated lazily, as always.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U2, U3};
    /// let b = TypedBlob::<f64, Shp<(U2, U3), (D<2>, D<3>)>>::new()?;
    /// assert_eq!(b.shape(), &[2, 3]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn new() -> Result<Self>
    where
        S: StaticShape,
    {
        Ok(Self::wrap(Blob::new(S::Dims::DIMS)?))
    }

    /// A blob whose one dynamic dim (the batch) is `n`; an error if the
    /// shape does not have exactly one dynamic dim.
    ///
    /// ```
    /// # use blob_runtime::typed::{Dyn, Shp, TypedBlob, D};
    /// # use typenum::U3;
    /// let b = TypedBlob::<f32, Shp<(Dyn, U3), (Dyn, D<3>)>>::with_dynamic(5)?;
    /// assert_eq!(b.shape(), &[5, 3]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn with_dynamic(n: usize) -> Result<Self> {
        let dyn_axes = S::Dims::IS_DYNAMIC.iter().filter(|&&d| d).count();
        if dyn_axes != 1 {
            return Err(BlobError::Legacy {
                op: "with_dynamic",
                shape: S::describe(),
                detail: format!(
                    "the shape has {dyn_axes} dynamic dims, with_dynamic needs exactly 1"
                ),
            });
        }
        let dims: Vec<usize> = S::Dims::DIMS
            .iter()
            .zip(S::Dims::IS_DYNAMIC)
            .map(|(&d, &dy)| if dy { n } else { d })
            .collect();
        Ok(Self::wrap(Blob::new(&dims)?))
    }

    /// A blob of `shape`, which must agree with every static dim; dynamic
    /// dims take their values from it. Checked once, here.
    ///
    /// ```
    /// # use blob_runtime::typed::{Dyn, Shp, TypedBlob, D};
    /// # use typenum::U3;
    /// type B = TypedBlob<f32, Shp<(Dyn, U3), (Dyn, D<3>)>>;
    /// assert!(B::from_shape(&[7, 3]).is_ok());
    /// assert!(B::from_shape(&[7, 4]).is_err());
    /// ```
    pub fn from_shape(shape: &[usize]) -> Result<Self> {
        check::<S>(shape).map_err(|e| BlobError::ShapeMismatch {
            op: "make",
            src: e.found,
            dst: e.expected,
        })?;
        Ok(Self::wrap(Blob::new(shape)?))
    }

    /// Sets the dynamic dim (the batch) to `n` (Caffe `Reshape` of the
    /// batch: memory only grows); an error if the shape has none.
    ///
    /// ```
    /// # use blob_runtime::typed::{Dyn, Shp, TypedBlob, D};
    /// # use typenum::U3;
    /// let mut b = TypedBlob::<f32, Shp<(Dyn, U3), (Dyn, D<3>)>>::with_dynamic(8)?;
    /// b.set_dynamic(2)?;
    /// assert_eq!(b.shape(), &[2, 3]);
    /// assert_eq!(b.capacity(), 24);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn set_dynamic(&mut self, n: usize) -> Result<()> {
        let Some(axis) = S::Dims::DYNAMIC_AXIS else {
            return Err(BlobError::Legacy {
                op: "set_dynamic",
                shape: S::describe(),
                detail: "the shape has no dynamic dim".into(),
            });
        };
        let mut dims = self.blob.shape().to_vec();
        dims[axis] = n;
        self.blob.reshape(&dims)
    }

    /// The runtime blob, for code that works on any shape. Free: the typed
    /// blob is the runtime blob.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::U4;
    /// let b = TypedBlob::<f32, Shp<(U4,), (D<4>,)>>::new()?;
    /// let dynamic: blob_runtime::Blob<f32> = b.into_dyn();
    /// assert_eq!(dynamic.count(), 4);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn into_dyn(self) -> Blob<T> {
        self.blob
    }

    /// The runtime blob, borrowed.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::U4;
    /// let b = TypedBlob::<f32, Shp<(U4,), (D<4>,)>>::new()?;
    /// assert_eq!(b.as_dyn().count(), 4);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn as_dyn(&self) -> &Blob<T> {
        &self.blob
    }

    /// The offset of `index` from the static dims alone, usable in `const`
    /// items (Caffe `offset`). Fails to compile (in a `const`) or panics
    /// when an index is out of bounds or its dim is dynamic.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U2, U3, U4};
    /// type B = TypedBlob<f32, Shp<(U2, U3, U4), (D<2>, D<3>, D<4>)>>;
    /// const OFF: usize = B::static_offset(&[1, 2, 3]);
    /// assert_eq!(OFF, 23);
    /// ```
    pub const fn static_offset(index: &[usize]) -> usize {
        let dims = S::Dims::DIMS;
        let dynamic = S::Dims::IS_DYNAMIC;
        assert!(
            index.len() <= dims.len(),
            "static_offset: more indices than axes"
        );
        let mut off = 0;
        let mut i = 0;
        while i < dims.len() {
            assert!(!dynamic[i], "static_offset: the shape has a dynamic dim");
            let ix = if i < index.len() { index[i] } else { 0 };
            assert!(
                ix < dims[i] || i >= index.len(),
                "static_offset: index out of bounds"
            );
            off = off * dims[i] + ix;
            i += 1;
        }
        off
    }

    #[inline(always)]
    fn dim(&self, axis: usize) -> usize {
        if S::Dims::IS_DYNAMIC[axis] {
            self.blob.shape()[axis]
        } else {
            S::Dims::DIMS[axis]
        }
    }

    /// The offset of a full index (Caffe `offset`), with static dims as
    /// constants: as cheap as hand-written index arithmetic.
    ///
    /// # Panics
    /// When an index is out of bounds, naming index and shape.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U2, U3};
    /// let b = TypedBlob::<f32, Shp<(U2, U3), (D<2>, D<3>)>>::new()?;
    /// assert_eq!(b.offset([1, 1]), 4);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    #[inline]
    #[track_caller]
    pub fn offset(&self, index: <S::Dims as DimList>::Index) -> usize {
        let idx = index.as_ref();
        let mut off = 0;
        for (axis, &i) in idx.iter().enumerate() {
            let d = self.dim(axis);
            if i >= d {
                self.out_of_bounds(idx);
            }
            off = off * d + i;
        }
        off
    }

    #[cold]
    #[track_caller]
    fn out_of_bounds(&self, idx: &[usize]) -> ! {
        panic!(
            "{}",
            BlobError::IndexOutOfBounds {
                op: "offset",
                index: idx.to_vec(),
                shape: self.blob.shape_string(),
            }
        )
    }

    /// One data element (Caffe `data_at`).
    ///
    /// # Panics
    /// As [`offset`](Self::offset), or if the data is being written.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::U2;
    /// let b = TypedBlob::<i32, Shp<(U2,), (D<2>,)>>::new()?;
    /// assert_eq!(b.data_at([1]), 0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    #[track_caller]
    pub fn data_at(&self, index: <S::Dims as DimList>::Index) -> T {
        let off = self.offset(index);
        self.blob.cpu_data().unwrap_or_else(|e| panic!("{e}"))[off]
    }

    /// One diff element (Caffe `diff_at`).
    ///
    /// # Panics
    /// As [`data_at`](Self::data_at).
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::U2;
    /// let b = TypedBlob::<f32, Shp<(U2,), (D<2>,)>>::new()?;
    /// assert_eq!(b.diff_at([0]), 0.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    #[track_caller]
    pub fn diff_at(&self, index: <S::Dims as DimList>::Index) -> T {
        let off = self.offset(index);
        self.blob.cpu_diff().unwrap_or_else(|e| panic!("{e}"))[off]
    }

    /// A data element at an index given as const generics, checked against
    /// the static dims when the program is built (rank 4).
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U1, U2, U3};
    /// let b = TypedBlob::<f32, Shp<(U1, U2, U3, U3), (D<1>, D<2>, D<3>, D<3>)>>::new()?;
    /// assert_eq!(b.data_at4::<0, 1, 2, 2>(), 0.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn data_at4<const N: usize, const C: usize, const H: usize, const W: usize>(&self) -> T {
        const {
            let d = S::Dims::DIMS;
            let dy = S::Dims::IS_DYNAMIC;
            assert!(d.len() == 4, "data_at4 needs a 4-axis shape");
            assert!(dy[0] || N < d[0], "data_at4: index 0 out of bounds");
            assert!(dy[1] || C < d[1], "data_at4: index 1 out of bounds");
            assert!(dy[2] || H < d[2], "data_at4: index 2 out of bounds");
            assert!(dy[3] || W < d[3], "data_at4: index 3 out of bounds");
        }
        let mut idx = [0usize; 4];
        idx.copy_from_slice(&[N, C, H, W]);
        let off = self.offset_slice(&idx);
        self.blob.cpu_data().unwrap_or_else(|e| panic!("{e}"))[off]
    }

    /// A data element at an index given as const generics (rank 2).
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U2, U3};
    /// let b = TypedBlob::<f32, Shp<(U2, U3), (D<2>, D<3>)>>::new()?;
    /// assert_eq!(b.data_at2::<1, 2>(), 0.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn data_at2<const I: usize, const J: usize>(&self) -> T {
        const {
            let d = S::Dims::DIMS;
            let dy = S::Dims::IS_DYNAMIC;
            assert!(d.len() == 2, "data_at2 needs a 2-axis shape");
            assert!(dy[0] || I < d[0], "data_at2: index 0 out of bounds");
            assert!(dy[1] || J < d[1], "data_at2: index 1 out of bounds");
        }
        let off = self.offset_slice(&[I, J]);
        self.blob.cpu_data().unwrap_or_else(|e| panic!("{e}"))[off]
    }

    #[track_caller]
    fn offset_slice(&self, idx: &[usize]) -> usize {
        let mut off = 0;
        for (axis, &i) in idx.iter().enumerate() {
            let d = self.dim(axis);
            if i >= d {
                self.out_of_bounds(idx);
            }
            off = off * d + i;
        }
        off
    }

    /// Caffe `num()`; only for shapes of at most 4 axes (a compile error
    /// otherwise).
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U2, U3};
    /// let b = TypedBlob::<f32, Shp<(U2, U3), (D<2>, D<3>)>>::new()?;
    /// assert_eq!((b.num(), b.channels(), b.height(), b.width()), (2, 3, 1, 1));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn num(&self) -> usize
    where
        S: LegacyRank,
    {
        self.blob.legacy_shape(0).expect("at most 4 axes by type")
    }

    /// Caffe `channels()`; only for shapes of at most 4 axes.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::U2;
    /// assert_eq!(TypedBlob::<f32, Shp<(U2,), (D<2>,)>>::new()?.channels(), 1);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn channels(&self) -> usize
    where
        S: LegacyRank,
    {
        self.blob.legacy_shape(1).expect("at most 4 axes by type")
    }

    /// Caffe `height()`; only for shapes of at most 4 axes.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::U2;
    /// assert_eq!(TypedBlob::<f32, Shp<(U2,), (D<2>,)>>::new()?.height(), 1);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn height(&self) -> usize
    where
        S: LegacyRank,
    {
        self.blob.legacy_shape(2).expect("at most 4 axes by type")
    }

    /// Caffe `width()`; only for shapes of at most 4 axes.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::U2;
    /// assert_eq!(TypedBlob::<f32, Shp<(U2,), (D<2>,)>>::new()?.width(), 1);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn width(&self) -> usize
    where
        S: LegacyRank,
    {
        self.blob.legacy_shape(3).expect("at most 4 axes by type")
    }

    /// The same elements under another shape of equal count (Caffe
    /// `Reshape` within capacity: nothing is copied or allocated). A
    /// different count is a compile error.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U2, U3, U6};
    /// let a = TypedBlob::<f32, Shp<(U2, U3), (D<2>, D<3>)>>::new()?;
    /// let b: TypedBlob<f32, Shp<(U6,), (D<6>,)>> = a.reshape();
    /// assert_eq!(b.shape(), &[6]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn reshape<S2: Shape>(self) -> TypedBlob<T, S2>
    where
        S: ReshapeInto<S2>,
    {
        let dyn_value = S::Dims::DYNAMIC_AXIS.map(|a| self.blob.shape()[a]);
        let dims: Vec<usize> = S2::Dims::DIMS
            .iter()
            .zip(S2::Dims::IS_DYNAMIC)
            .map(|(&d, &dy)| if dy { dyn_value.unwrap_or(0) } else { d })
            .collect();
        let mut blob = self.blob;
        blob.reshape(&dims)
            .expect("equal counts by type: reshape allocates nothing and cannot fail");
        TypedBlob::wrap(blob)
    }

    /// The same blob under another name for the same dims (a declared
    /// shape, or a literal one for a derived result): free, and checked at
    /// compile time.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U2, U3, U12};
    /// let a = TypedBlob::<f32, Shp<(U2, U3, U2), (D<2>, D<3>, D<2>)>>::new()?;
    /// let b: TypedBlob<f32, Shp<(U2, U3, U2), (D<2>, D<3>, D<2>)>> = a.into_shape();
    /// let flat: TypedBlob<f32, Shp<(U2, typenum::U6), (D<2>, D<6>)>> = b.flatten().into_shape();
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn into_shape<S2: Shape>(self) -> TypedBlob<T, S2>
    where
        S: SameShapeAs<S2>,
    {
        TypedBlob::wrap(self.blob)
    }

    /// `(N, C, H, W)` to `(N, C*H*W)` (Caffe Flatten), as a reshape.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U2, U3, U4};
    /// let a = TypedBlob::<f32, Shp<(U2, U3, U4), (D<2>, D<3>, D<4>)>>::new()?;
    /// assert_eq!(a.flatten().shape(), &[2, 12]);
    /// // Name the result with a declared shape of the same dims:
    /// # let a = TypedBlob::<f32, Shp<(U2, U3, U4), (D<2>, D<3>, D<4>)>>::new()?;
    /// let flat: TypedBlob<f32, Shp<(U2, typenum::U12), (D<2>, D<12>)>> = a.flatten().into_shape();
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn flatten(self) -> TypedBlob<T, FlatOf<S>>
    where
        S: Flatten,
    {
        let first = self.blob.shape().first().copied().unwrap_or(1);
        let rest = self.blob.count_from(1).unwrap_or(1);
        let mut blob = self.blob;
        blob.reshape(&[first, rest])
            .expect("same count: reshape allocates nothing and cannot fail");
        TypedBlob::wrap(blob)
    }

    /// Copies `source`'s data (or diff) in (Caffe `CopyFrom`); shapes and
    /// element types must match at compile time.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::U2;
    /// type B = TypedBlob<f32, Shp<(U2,), (D<2>,)>>;
    /// let (a, mut b) = (B::new()?, B::new()?);
    /// a.mutable_cpu_data()?.fill(3.0);
    /// b.copy_from(&a, false)?;
    /// assert_eq!(b.data_at([1]), 3.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn copy_from<U, S2>(&mut self, source: &TypedBlob<U, S2>, copy_diff: bool) -> Result<()>
    where
        U: SameElement<T>,
        S2: SameShapeAs<S>,
    {
        self.blob
            .copy_from(as_same::<T, U>(&source.blob), copy_diff, false)
    }

    /// Shares `other`'s data memory (Caffe `ShareData`); equal counts are
    /// checked at compile time.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U2, U3, U6};
    /// let a = TypedBlob::<f32, Shp<(U2, U3), (D<2>, D<3>)>>::new()?;
    /// let mut b = TypedBlob::<f32, Shp<(U6,), (D<6>,)>>::new()?;
    /// b.share_data(&a)?;
    /// a.mutable_cpu_data()?[5] = 1.0;
    /// assert_eq!(b.data_at([5]), 1.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn share_data<U, S2>(&mut self, other: &TypedBlob<U, S2>) -> Result<()>
    where
        U: SameElement<T>,
        S2: ShareWith<S>,
    {
        self.blob.share_data(as_same::<T, U>(&other.blob))
    }

    /// Shares `other`'s diff memory (Caffe `ShareDiff`).
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::U2;
    /// type B = TypedBlob<f32, Shp<(U2,), (D<2>,)>>;
    /// let (a, mut b) = (B::new()?, B::new()?);
    /// b.share_diff(&a)?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn share_diff<U, S2>(&mut self, other: &TypedBlob<U, S2>) -> Result<()>
    where
        U: SameElement<T>,
        S2: ShareWith<S>,
    {
        self.blob.share_diff(as_same::<T, U>(&other.blob))
    }
}

impl<T: MathElement, S: Shape> TypedBlob<T, S> {
    /// `data += alpha * x.data` (Caffe `caffe_axpy` on two blobs); shapes
    /// must match at compile time.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::U2;
    /// type B = TypedBlob<f32, Shp<(U2,), (D<2>,)>>;
    /// let (x, y) = (B::new()?, B::new()?);
    /// x.mutable_cpu_data()?.fill(1.0);
    /// y.axpy(2.0, &x)?;
    /// assert_eq!(y.data_at([0]), 2.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn axpy<U, S2>(&self, alpha: T, x: &TypedBlob<U, S2>) -> Result<()>
    where
        U: SameElement<T>,
        S2: SameShapeAs<S>,
    {
        let x = as_same::<T, U>(&x.blob);
        if x.shape() != self.blob.shape() {
            return Err(BlobError::ShapeMismatch {
                op: "axpy",
                src: x.shape_string(),
                dst: self.blob.shape_string(),
            });
        }
        let xd = x.cpu_data()?;
        cpu::axpy(alpha, &xd, &mut self.blob.mutable_cpu_data()?);
        Ok(())
    }

    /// `self (B, K) x weights (N, K)^T -> (B, N)`: Caffe's InnerProduct
    /// forward (one gemm). `K` must agree at compile time; the output has
    /// this blob's batch.
    ///
    /// ```
    /// # use blob_runtime::typed::{Shp, TypedBlob, D};
    /// # use typenum::{U1, U2, U3};
    /// let x = TypedBlob::<f32, Shp<(U1, U3), (D<1>, D<3>)>>::new()?;
    /// let w = TypedBlob::<f32, Shp<(U2, U3), (D<2>, D<3>)>>::new()?;
    /// x.mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0, 3.0]);
    /// w.mutable_cpu_data()?.copy_from_slice(&[1.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
    /// let y = x.inner_product(&w)?;
    /// assert_eq!(&*y.cpu_data()?, &[1.0, 5.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn inner_product<U, W>(
        &self,
        weights: &TypedBlob<U, W>,
    ) -> Result<TypedBlob<T, InnerProductOf<S, W>>>
    where
        U: SameElement<T>,
        W: Shape,
        S: InnerProductWith<W>,
    {
        let w = as_same::<T, U>(&weights.blob);
        let (b, k) = (self.blob.shape()[0], self.blob.shape()[1]);
        let (n, k2) = (w.shape()[0], w.shape()[1]);
        if k != k2 {
            return Err(BlobError::ShapeMismatch {
                op: "inner_product",
                src: w.shape_string(),
                dst: self.blob.shape_string(),
            });
        }
        let out = Blob::<T>::new(&[b, n])?;
        {
            let x = self.blob.cpu_data()?;
            let wd = w.cpu_data()?;
            let mut y = out.mutable_cpu_data()?;
            cpu::gemm(
                Transpose::No,
                Transpose::Yes,
                b,
                n,
                k,
                T::ONE,
                &x,
                &wd,
                T::ZERO,
                &mut y,
            );
        }
        Ok(TypedBlob::wrap(out))
    }
}

fn check<S: Shape>(shape: &[usize]) -> std::result::Result<(), ShapeError> {
    let err = |detail: String| ShapeError {
        found: shape_string(shape),
        expected: S::describe(),
        detail,
    };
    if shape.len() != S::Dims::RANK {
        return Err(err(format!(
            "{} axes, the type has {}",
            shape.len(),
            S::Dims::RANK
        )));
    }
    for (axis, ((&got, &want), &dy)) in shape
        .iter()
        .zip(S::Dims::DIMS)
        .zip(S::Dims::IS_DYNAMIC)
        .enumerate()
    {
        if !dy && got != want {
            return Err(err(format!("dim {axis} is {got}, the type says {want}")));
        }
    }
    Ok(())
}

impl<T: Element> Blob<T> {
    /// Views this blob as a typed blob of shape `S`, checking the run-time
    /// shape against every static dim; the error names both shapes.
    ///
    /// ```
    /// use blob_runtime::{Blob, typed::{Dyn, Shp, D}};
    /// use typenum::U3;
    /// let b = Blob::<f32>::new(&[8, 3]).unwrap();
    /// let t = b.try_into_static::<Shp<(Dyn, U3), (Dyn, D<3>)>>().unwrap();
    /// assert_eq!(t.shape(), &[8, 3]);
    /// ```
    pub fn try_into_static<S: Shape>(self) -> std::result::Result<TypedBlob<T, S>, ShapeError> {
        check::<S>(self.shape())?;
        Ok(TypedBlob::wrap(self))
    }
}
