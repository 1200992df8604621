//! `TypedBlob<T, S>`: a runtime [`Blob`] whose shape is the type `S`.

use std::any::Any;
use std::marker::PhantomData;
use std::ops::Deref;

use blob_kernels::cpu::{self, Transpose};

use super::relations::{
    CountKnown, Flat, Flatten, InnerProductOut, LegacyRank, MatrixInput, ReshapeFrom, SameElement,
    SameShapeAs, ShareWith, WeightsFor,
};
use super::shape::{DimList, Rank2, Rank4, Shape, StaticShape};
use super::twin::{Axis, Idx, Within};
use crate::blob::{Blob, shape_string};
use crate::element::{Element, MathElement};
use crate::error::{BlobError, Result, ShapeError};

/// A blob whose shape is a type: dims known at compile time are constants,
/// and operations between blobs check their shapes when the program is
/// compiled. Underneath is an ordinary [`Blob`] (reachable through `Deref`
/// and [`into_dyn`](Self::into_dyn), which cost nothing), so every runtime
/// method is available, and Caffe's memory semantics are unchanged.
///
/// `blob!(f32; 64, 3, 32, 32)` is `TypedBlob<f32, (D<64>, D<3>, D<32>, D<32>)>`.
///
/// ```
/// use blob_runtime::blob;
/// type Two3 = blob!(f32; 2, 3);
/// let b = Two3::new()?;
/// assert_eq!(Two3::COUNT, 6);
/// b.mutable_cpu_data()?[b.offset([1, 2])] = 7.0;
/// assert_eq!(b.data_at([1, 2]), 7.0);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
// No `S: Shape` bound here: result types must be well-formed even when a
// relation fails, so that the compiler reports the relation's own message
// rather than an unusable method. `repr(transparent)`: a `&Blob<T>` whose
// shape was checked is viewed as a `&TypedBlob<T, S>` in place
// ([`Blob::as_typed`]), which is how a typed layer sees a net's blobs.
#[repr(transparent)]
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

    /// [`wrap`](Self::wrap) under a `Result`. A `match` rather than
    /// `Result::map` or `?`: every generic function here is compiled once
    /// per shape, and a closure or a `?` adds one more each.
    fn wrap_ok(blob: Result<Blob<T>>) -> Result<Self> {
        match blob {
            Ok(blob) => Ok(Self::wrap(blob)),
            Err(e) => Err(e),
        }
    }
}

impl<T: Element, S: StaticShape> TypedBlob<T, S> {
    /// Element count; only for shapes whose every dim is static (one with
    /// a dynamic dim has [`ITEM_COUNT`](Self::ITEM_COUNT) per unit of it).
    ///
    /// ```
    /// assert_eq!(<blob_runtime::blob!(f32; 2, 3, 4)>::COUNT, 24);
    /// ```
    pub const COUNT: usize = S::Dims::ITEM_COUNT;
}

impl<T: Element, S: Shape> TypedBlob<T, S> {
    /// Number of axes.
    pub const RANK: usize = S::Dims::RANK;
    /// Each dim's value, `None` for the dynamic one.
    pub const STATIC_DIMS: &'static [Option<usize>] = S::Dims::STATIC_DIMS;
    /// Row-major strides (0 where a dynamic dim hides them).
    pub const STRIDES: &'static [usize] = S::Dims::STRIDES;
    /// Elements per unit of the dynamic dim (per item of the batch); the
    /// whole count when every dim is static.
    ///
    /// ```
    /// assert_eq!(<blob_runtime::blob!(f32; _, 3, 32, 32)>::ITEM_COUNT, 3072);
    /// ```
    pub const ITEM_COUNT: usize = S::Dims::ITEM_COUNT;

    /// A blob of the shape, every dim static (Caffe `Blob(shape)`); memory
    /// is allocated lazily, as always.
    ///
    /// ```
    /// let b = <blob_runtime::blob!(f64; 2, 3)>::new()?;
    /// assert_eq!(b.shape(), &[2, 3]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn new() -> Result<Self>
    where
        S: StaticShape,
    {
        Self::wrap_ok(static_blob(S::Dims::STATIC_DIMS))
    }

    /// A blob whose one dynamic dim (the batch) is `n`; an error if the
    /// shape does not have exactly one dynamic dim.
    ///
    /// ```
    /// let b = <blob_runtime::blob!(f32; _, 3)>::with_dynamic(5)?;
    /// assert_eq!(b.shape(), &[5, 3]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn with_dynamic(n: usize) -> Result<Self> {
        Self::wrap_ok(dynamic_blob(S::Dims::STATIC_DIMS, n, S::describe))
    }

    /// A blob of `shape`, which must agree with every static dim; dynamic
    /// dims take their values from it. Checked once, here.
    ///
    /// ```
    /// type B = blob_runtime::blob!(f32; _, 3);
    /// assert!(B::from_shape(&[7, 3]).is_ok());
    /// assert!(B::from_shape(&[7, 4]).is_err());
    /// ```
    pub fn from_shape(shape: &[usize]) -> Result<Self> {
        check::<S>(shape)?;
        Self::wrap_ok(Blob::new(shape))
    }

    /// A blob of `shape` (checked against the type, as in
    /// [`from_shape`](Self::from_shape)) holding `values`, adopted without
    /// a copy as [`Blob::from_vec`] does; an error naming both counts if
    /// they differ.
    ///
    /// ```
    /// type Pairs = blob_runtime::blob!(f32; _, 2);
    /// let b = Pairs::from_vec(&[2, 2], vec![1.0, 2.0, 3.0, 4.0])?;
    /// assert_eq!(b.data_at([1, 0]), 3.0);
    /// assert!(Pairs::from_vec(&[2, 3], vec![0.0; 6]).is_err()); // not (_, 2)
    /// assert!(Pairs::from_vec(&[2, 2], vec![0.0; 3]).is_err()); // 3 values, not 4
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn from_vec(shape: &[usize], values: Vec<T>) -> Result<Self> {
        check::<S>(shape)?;
        Self::wrap_ok(Blob::from_vec(shape, values))
    }

    /// Sets the dynamic dim (the batch) to `n` (Caffe `Reshape` of the
    /// batch: memory only grows); an error if the shape has none.
    ///
    /// ```
    /// let mut b = <blob_runtime::blob!(f32; _, 3)>::with_dynamic(8)?;
    /// b.set_dynamic(2)?;
    /// assert_eq!(b.shape(), &[2, 3]);
    /// assert_eq!(b.capacity(), 24);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn set_dynamic(&mut self, n: usize) -> Result<()> {
        let Some(axis) = S::Dims::DYNAMIC_AXIS else {
            return Err(ShapeError::DynamicDims {
                op: "set_dynamic",
                shape: S::describe(),
                dynamic: 0,
            }
            .into());
        };
        let mut dims = self.blob.shape().to_vec();
        dims[axis] = n;
        self.blob.reshape(&dims)
    }

    /// The runtime blob, for code that works on any shape. Free: the typed
    /// blob is the runtime blob.
    ///
    /// ```
    /// let b = <blob_runtime::blob!(f32; 4)>::new()?;
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
    /// let b = <blob_runtime::blob!(f32; 4)>::new()?;
    /// assert_eq!(b.as_dyn().count(), 4);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn as_dyn(&self) -> &Blob<T> {
        &self.blob
    }

    /// The runtime blob, mutably borrowed, for runtime operations that need
    /// `&mut` (sharing, reshaping to the same dims). Changing its shape
    /// away from `S` is a logic error the typed methods then report.
    ///
    /// ```
    /// let mut b = <blob_runtime::blob!(f32; 4)>::new()?;
    /// b.as_dyn_mut().shrink_to_fit()?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn as_dyn_mut(&mut self) -> &mut Blob<T> {
        &mut self.blob
    }

    /// Puts this blob on `device`, data and diff kept, its shape type
    /// unchanged ([`Blob::move_to`]).
    ///
    /// ```
    /// use blob_runtime::host_device::HostDevice;
    /// let mut w = <blob_runtime::blob!(f32; 2, 3)>::new()?;
    /// w.mutable_cpu_data()?.fill(1.5);
    /// w.move_to(HostDevice::new())?;
    /// assert!(w.device().is_some());
    /// assert_eq!(w.to_vec()?, vec![1.5; 6]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn move_to(&mut self, device: std::sync::Arc<dyn crate::DeviceBackend>) -> Result<()> {
        self.blob.move_to(device)
    }

    /// The offset of `index` from the static dims alone, usable in `const`
    /// items (Caffe `offset`). Fails to compile (in a `const`) or panics
    /// when an index is out of bounds or its dim is dynamic.
    ///
    /// ```
    /// type B = blob_runtime::blob!(f32; 2, 3, 4);
    /// const OFF: usize = B::static_offset(&[1, 2, 3]);
    /// assert_eq!(OFF, 23);
    /// ```
    pub const fn static_offset(index: &[usize]) -> usize {
        let dims = S::Dims::STATIC_DIMS;
        assert!(
            index.len() <= dims.len(),
            "static_offset: more indices than axes"
        );
        let mut off = 0;
        let mut i = 0;
        while i < dims.len() {
            let Some(d) = dims[i] else {
                panic!("static_offset: the shape has a dynamic dim");
            };
            let ix = if i < index.len() { index[i] } else { 0 };
            assert!(
                ix < d || i >= index.len(),
                "static_offset: index out of bounds"
            );
            off = off * d + ix;
            i += 1;
        }
        off
    }

    #[inline(always)]
    fn dim(&self, axis: usize) -> usize {
        match S::Dims::STATIC_DIMS[axis] {
            Some(d) => d,
            None => self.blob.shape()[axis],
        }
    }

    /// The offset of a full index (Caffe `offset`), with static dims as
    /// constants: as cheap as hand-written index arithmetic.
    ///
    /// # Panics
    /// When an index is out of bounds, naming index and shape.
    ///
    /// ```
    /// let b = <blob_runtime::blob!(f32; 2, 3)>::new()?;
    /// assert_eq!(b.offset([1, 1]), 4);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    #[inline]
    #[track_caller]
    pub fn offset(&self, index: <S::Dims as DimList>::Index) -> usize {
        self.offset_of(index.as_ref())
    }

    #[inline]
    #[track_caller]
    fn offset_of(&self, idx: &[usize]) -> usize {
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
    /// let b = <blob_runtime::blob!(i32; 2)>::new()?;
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
    /// let b = <blob_runtime::blob!(f32; 2)>::new()?;
    /// assert_eq!(b.diff_at([0]), 0.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    #[track_caller]
    pub fn diff_at(&self, index: <S::Dims as DimList>::Index) -> T {
        let off = self.offset(index);
        self.blob.cpu_diff().unwrap_or_else(|e| panic!("{e}"))[off]
    }

    /// A data element at an index given as const generics, each checked
    /// against its static dim by the compiler (`cargo check` reports an
    /// index out of bounds, naming the axis and the dim); a dynamic dim is
    /// checked when the element is read.
    ///
    /// ```
    /// let b = <blob_runtime::blob!(f32; 1, 2, 3, 3)>::new()?;
    /// assert_eq!(b.data_at4::<0, 1, 2, 2>(), 0.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    ///
    /// ```compile_fail
    /// let b = <blob_runtime::blob!(f32; 1, 2, 3, 3)>::new().unwrap();
    /// b.data_at4::<0, 2, 0, 0>(); // Idx<2> is out of bounds on Axis<1>, whose dim is D<2>
    /// ```
    #[track_caller]
    pub fn data_at4<const N: usize, const C: usize, const H: usize, const W: usize>(&self) -> T
    where
        S::Dims: Rank4,
        Idx<N>: Within<<S::Dims as Rank4>::A0, Axis<0>>,
        Idx<C>: Within<<S::Dims as Rank4>::A1, Axis<1>>,
        Idx<H>: Within<<S::Dims as Rank4>::A2, Axis<2>>,
        Idx<W>: Within<<S::Dims as Rank4>::A3, Axis<3>>,
    {
        let off = self.offset_of(&[N, C, H, W]);
        self.blob.cpu_data().unwrap_or_else(|e| panic!("{e}"))[off]
    }

    /// A data element at an index given as const generics (rank 2),
    /// checked by the compiler as [`data_at4`](Self::data_at4).
    ///
    /// ```
    /// let b = <blob_runtime::blob!(f32; 2, 3)>::new()?;
    /// assert_eq!(b.data_at2::<1, 2>(), 0.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    #[track_caller]
    pub fn data_at2<const I: usize, const J: usize>(&self) -> T
    where
        S::Dims: Rank2,
        Idx<I>: Within<<S::Dims as Rank2>::A0, Axis<0>>,
        Idx<J>: Within<<S::Dims as Rank2>::A1, Axis<1>>,
    {
        let off = self.offset_of(&[I, J]);
        self.blob.cpu_data().unwrap_or_else(|e| panic!("{e}"))[off]
    }

    fn legacy(&self, axis: isize) -> usize {
        self.blob
            .legacy_shape(axis)
            .expect("at most 4 axes by type")
    }

    /// Caffe `num()`; only for shapes of at most 4 axes (a compile error
    /// otherwise).
    ///
    /// ```
    /// let b = <blob_runtime::blob!(f32; 2, 3)>::new()?;
    /// assert_eq!((b.num(), b.channels(), b.height(), b.width()), (2, 3, 1, 1));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn num(&self) -> usize
    where
        S: LegacyRank,
    {
        self.legacy(0)
    }

    /// Caffe `channels()`; only for shapes of at most 4 axes.
    ///
    /// ```
    /// assert_eq!(<blob_runtime::blob!(f32; 2)>::new()?.channels(), 1);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn channels(&self) -> usize
    where
        S: LegacyRank,
    {
        self.legacy(1)
    }

    /// Caffe `height()`; only for shapes of at most 4 axes.
    ///
    /// ```
    /// assert_eq!(<blob_runtime::blob!(f32; 2)>::new()?.height(), 1);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn height(&self) -> usize
    where
        S: LegacyRank,
    {
        self.legacy(2)
    }

    /// Caffe `width()`; only for shapes of at most 4 axes.
    ///
    /// ```
    /// assert_eq!(<blob_runtime::blob!(f32; 2)>::new()?.width(), 1);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn width(&self) -> usize
    where
        S: LegacyRank,
    {
        self.legacy(3)
    }

    /// The same elements under another shape of equal count (Caffe
    /// `Reshape` within capacity: nothing is copied or allocated). A
    /// different count is a compile error that gives both counts.
    ///
    /// ```
    /// use blob_runtime::blob;
    /// let a = <blob!(f32; 2, 3)>::new()?;
    /// let b: blob!(f32; 6) = a.reshape();
    /// assert_eq!(b.shape(), &[6]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn reshape<S2>(self) -> TypedBlob<T, S2>
    where
        S: CountKnown,
        S2: CountKnown + ReshapeFrom<S>,
    {
        let dyn_value = S::Dims::DYNAMIC_AXIS.map(|a| self.blob.shape()[a]);
        let dims = with_dynamic_dims(S2::Dims::STATIC_DIMS, dyn_value.unwrap_or(0));
        let mut blob = self.blob;
        blob.reshape(&dims)
            .expect("equal counts by type: reshape allocates nothing and cannot fail");
        TypedBlob::wrap(blob)
    }

    /// The same blob under another shape type with the same dims (a
    /// declared name, or the anonymous tuple): free, and checked at compile
    /// time.
    ///
    /// ```
    /// use blob_runtime::blob;
    /// blob!(pub shape Patch = 2, 3, 2);
    /// let a = <blob!(f32; 2, 3, 2)>::new()?;
    /// let named: blob_runtime::typed::TypedBlob<f32, Patch> = a.into_shape();
    /// let flat: blob!(f32; 2, 6) = named.flatten().into_shape();
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn into_shape<S2: Shape>(self) -> TypedBlob<T, S2>
    where
        S: SameShapeAs<S2>,
    {
        TypedBlob::wrap(self.blob)
    }

    /// Copies `source`'s data (or diff) in (Caffe `CopyFrom`); shapes and
    /// element types must match at compile time. The same call as
    /// [`Blob::copy_from`], which checks the shapes at run time.
    ///
    /// ```
    /// type B = blob_runtime::blob!(f32; 2);
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
            .copy_from(as_same::<T, U>(&source.blob), copy_diff)
    }

    /// Shares `other`'s data memory (Caffe `ShareData`); equal counts are
    /// checked at compile time.
    ///
    /// ```
    /// use blob_runtime::blob;
    /// let a = <blob!(f32; 2, 3)>::new()?;
    /// let mut b = <blob!(f32; 6)>::new()?;
    /// b.share_data(&a)?;
    /// a.mutable_cpu_data()?[5] = 1.0;
    /// assert_eq!(b.data_at([5]), 1.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn share_data<U, S2>(&mut self, other: &TypedBlob<U, S2>) -> Result<()>
    where
        U: SameElement<T>,
        S: CountKnown,
        S2: CountKnown + ShareWith<S>,
    {
        self.blob.share_data(as_same::<T, U>(&other.blob))
    }

    /// Shares `other`'s diff memory (Caffe `ShareDiff`).
    ///
    /// ```
    /// type B = blob_runtime::blob!(f32; 2);
    /// let (a, mut b) = (B::new()?, B::new()?);
    /// b.share_diff(&a)?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn share_diff<U, S2>(&mut self, other: &TypedBlob<U, S2>) -> Result<()>
    where
        U: SameElement<T>,
        S: CountKnown,
        S2: CountKnown + ShareWith<S>,
    {
        self.blob.share_diff(as_same::<T, U>(&other.blob))
    }

    /// `(N, C, H, W)` to `(N, C*H*W)` (Caffe Flatten), as a reshape.
    ///
    /// ```
    /// let a = <blob_runtime::blob!(f32; 2, 3, 4)>::new()?;
    /// assert_eq!(a.flatten().shape(), &[2, 12]);
    /// // The result's type is `Flat<..>`; give it its tuple (or a declared
    /// // name) with `into_shape`, for free:
    /// # let a = <blob_runtime::blob!(f32; 2, 3, 4)>::new()?;
    /// let flat: blob_runtime::blob!(f32; 2, 12) = a.flatten().into_shape();
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn flatten(self) -> TypedBlob<T, Flat<S>>
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
}

impl<T: MathElement, S: Shape> TypedBlob<T, S> {
    /// `data += alpha * x.data` (Caffe `caffe_axpy` on two blobs); shapes
    /// must match at compile time.
    ///
    /// ```
    /// type B = blob_runtime::blob!(f32; 2);
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
    /// use blob_runtime::blob;
    /// let x = <blob!(f32; 1, 3)>::new()?;
    /// let w = <blob!(f32; 2, 3)>::new()?;
    /// x.mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0, 3.0]);
    /// w.mutable_cpu_data()?.copy_from_slice(&[1.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
    /// let y: blob!(f32; 1, 2) = x.inner_product(&w)?;
    /// assert_eq!(&*y.cpu_data()?, &[1.0, 5.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn inner_product<U, W>(
        &self,
        weights: &TypedBlob<U, W>,
    ) -> Result<TypedBlob<T, InnerProductOut<S, W>>>
    where
        U: SameElement<T>,
        S: MatrixInput,
        W: WeightsFor<S>,
    {
        TypedBlob::wrap_ok(inner_product_blobs(
            &self.blob,
            as_same::<T, U>(&weights.blob),
        ))
    }
}

// The bodies below are shared by every shape: generic methods of
// `TypedBlob<T, S>` are instantiated once per shape, so they hand the work
// to these, instantiated once per element type, to keep builds fast.

fn static_blob<T: Element>(dims: &[Option<usize>]) -> Result<Blob<T>> {
    let dims: Vec<usize> = dims.iter().map(|d| d.unwrap_or(0)).collect();
    Blob::new(&dims)
}

fn dynamic_blob<T: Element>(
    dims: &[Option<usize>],
    n: usize,
    describe: fn() -> String,
) -> Result<Blob<T>> {
    let dynamic = dims.iter().filter(|d| d.is_none()).count();
    if dynamic != 1 {
        return Err(ShapeError::DynamicDims {
            op: "with_dynamic",
            shape: describe(),
            dynamic,
        }
        .into());
    }
    Blob::new(&with_dynamic_dims(dims, n))
}

/// The static dims, with `n` for each dynamic one.
fn with_dynamic_dims(dims: &[Option<usize>], n: usize) -> Vec<usize> {
    dims.iter().map(|d| d.unwrap_or(n)).collect()
}

fn inner_product_blobs<T: MathElement>(x: &Blob<T>, w: &Blob<T>) -> Result<Blob<T>> {
    let (b, k) = (x.shape()[0], x.shape()[1]);
    let (n, k2) = (w.shape()[0], w.shape()[1]);
    if k != k2 {
        return Err(BlobError::ShapeMismatch {
            op: "inner_product",
            src: w.shape_string(),
            dst: x.shape_string(),
        });
    }
    let out = Blob::<T>::new(&[b, n])?;
    {
        let xd = x.cpu_data()?;
        let wd = w.cpu_data()?;
        let mut y = out.mutable_cpu_data()?;
        cpu::gemm(
            Transpose::No,
            Transpose::Yes,
            b,
            n,
            k,
            T::ONE,
            &xd,
            &wd,
            T::ZERO,
            &mut y,
        );
    }
    Ok(out)
}

pub(crate) fn check<S: Shape>(shape: &[usize]) -> std::result::Result<(), ShapeError> {
    check_dims(shape, S::Dims::STATIC_DIMS, S::describe)
}

fn check_dims(
    shape: &[usize],
    dims: &[Option<usize>],
    describe: fn() -> String,
) -> std::result::Result<(), ShapeError> {
    let err = |detail: String| ShapeError::Mismatch {
        found: shape_string(shape),
        expected: describe(),
        detail,
    };
    if shape.len() != dims.len() {
        return Err(err(format!(
            "{} axes, the type has {}",
            shape.len(),
            dims.len()
        )));
    }
    for (axis, (&got, want)) in shape.iter().zip(dims).enumerate() {
        if let Some(want) = *want
            && got != want
        {
            return Err(err(format!("dim {axis} is {got}, the type says {want}")));
        }
    }
    Ok(())
}

impl<T: Element> Blob<T> {
    /// This blob, borrowed, as a typed blob of shape `S`: compile-time
    /// strides, `offset` and `data_at`, and every typed operation, on a
    /// blob someone else owns (a net's, a layer's bottom). The run-time
    /// shape is checked against every static dim; the error names both
    /// shapes. Nothing is copied: the view is the blob.
    ///
    /// ```
    /// use blob_runtime::{Blob, typed::{D, Dyn}};
    /// let b = Blob::<f32>::from_vec(&[2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0])?;
    /// let rows = b.as_typed::<(Dyn, D<3>)>()?;
    /// assert_eq!(rows.data_at([1, 2]), 5.0);
    /// assert_eq!(rows.offset([1, 2]), 5);
    /// let err = b.as_typed::<(Dyn, D<4>)>().unwrap_err();
    /// assert_eq!(err.to_string(), "cannot use a blob of shape 2 3 (6) as _ 4: dim 1 is 3, the type says 4");
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn as_typed<S: Shape>(&self) -> std::result::Result<&TypedBlob<T, S>, ShapeError> {
        check::<S>(self.shape())?;
        // SAFETY: `TypedBlob<T, S>` is `repr(transparent)` over `Blob<T>`
        // (its other field is a zero-sized `PhantomData`), so the two
        // references have one layout; the borrow keeps `self`'s lifetime,
        // and `&self` keeps the shape from changing while it lives.
        Ok(unsafe { &*(self as *const Blob<T>).cast::<TypedBlob<T, S>>() })
    }

    /// Views this blob as a typed blob of shape `S`, checking the run-time
    /// shape against every static dim; the error names both shapes.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[8, 3]).unwrap();
    /// let t = b.try_into_static::<(blob_runtime::typed::Dyn, blob_runtime::typed::D<3>)>().unwrap();
    /// assert_eq!(t.shape(), &[8, 3]);
    /// ```
    pub fn try_into_static<S: Shape>(self) -> std::result::Result<TypedBlob<T, S>, ShapeError> {
        check::<S>(self.shape())?;
        Ok(TypedBlob::wrap(self))
    }
}
