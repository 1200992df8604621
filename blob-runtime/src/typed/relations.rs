//! What may be done between shapes, checked by the compiler.
//!
//! Each relation is a trait of this crate with a blanket impl whose
//! conditions compare dims or counts. `#[diagnostic::on_unimplemented]`
//! words the error with the shapes as they were written (`(D<64>, D<3>)`,
//! or a declared `Conv1Out`) and the numbers that disagree, and
//! `#[diagnostic::do_not_recommend]` keeps rustc from reporting the
//! condition underneath instead.

use super::dims::Dim;
use std::marker::PhantomData;

use super::shape::{Counted, DimList, Rank2, Shape};
use super::twin::{DimMul, Twin};
use crate::element::Element;

mod sealed {
    pub trait Sealed<T: ?Sized> {}
    impl<A: ?Sized, T: ?Sized> Sealed<T> for A {}
}

/// Type equality, the building block of the relations.
pub trait SameAs<T>: sealed::Sealed<T> {}
impl<T> SameAs<T> for T {}

/// `Self` can be reshaped into `Target`: equal element counts, known at
/// compile time (and the same number of dynamic dims, whose value carries
/// over).
#[diagnostic::on_unimplemented(
    message = "cannot reshape {Self} into {Target}: element counts differ ({SelfCount} vs {TargetCount})",
    label = "element counts differ",
    note = "reshape keeps every element, so both shapes need the same product of dims"
)]
pub trait ReshapeInto<
    Target: Shape,
    SelfCount = <Self as Shape>::CountName,
    TargetCount = <Target as Shape>::CountName,
>: Shape
{
}

#[diagnostic::do_not_recommend]
impl<S: Shape, T: Shape> ReshapeInto<T> for S
where
    S::Counts: Counted,
    T::Counts: Counted,
    <S::Counts as Counted>::Count: SameAs<<T::Counts as Counted>::Count>,
    <S::Counts as Counted>::DynRank: SameAs<<T::Counts as Counted>::DynRank>,
{
}

/// `Self`'s element count is known at compile time: for a declared shape
/// of literals, and for every shape whose dims are literals (of any size:
/// `blob!` writes one above 4096 as a [`Thousands`](super::Thousands)) or
/// `D<N>` up to 4096. A named constant above 4096 (`D<WIDE>`) has no
/// count. Checked before the counts are compared, so that an unknown
/// count is reported as unknown rather than as a difference.
///
/// ```
/// use blob_runtime::blob;
/// use blob_runtime::typed::{CountKnown, D, Shape};
/// fn count_known<S: CountKnown>() {}
/// count_known::<(D<64>, D<4096>)>();
/// fn of<S: CountKnown>(_: &blob_runtime::typed::TypedBlob<f32, S>) {}
/// of(&<blob!(f32; 2, 25088)>::new()?);
/// // count_known::<(D<2>, D<5000>)>(); // error: the element count of (D<2>, D<5000>) is not known at compile time
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "the element count of {Self} is not known at compile time: it has a `D<N>` above 4096",
    label = "element count unknown at compile time",
    note = "write a dim above 4096 as a literal in `blob!` (`blob!(f32; 2, 5000)`), whose count is known; a named constant above 4096 has no compile-time arithmetic"
)]
pub trait CountKnown: Shape {}

#[diagnostic::do_not_recommend]
impl<S: Shape> CountKnown for S where S::Counts: Counted {}

/// [`ReshapeInto`] seen from the target: what `reshape` requires, so that
/// the compiler waits for the target type (often given by a `let`) before
/// it reports, and names it.
#[diagnostic::on_unimplemented(
    message = "cannot reshape {Source} into {Self}: element counts differ ({SourceCount} vs {SelfCount})",
    label = "element counts differ",
    note = "reshape keeps every element, so both shapes need the same product of dims"
)]
pub trait ReshapeFrom<
    Source: Shape,
    SourceCount = <Source as Shape>::CountName,
    SelfCount = <Self as Shape>::CountName,
>: Shape
{
}

#[diagnostic::do_not_recommend]
impl<S: Shape, T: Shape> ReshapeFrom<S> for T where S: ReshapeInto<T> {}

/// `Self` and `Target` share memory: equal element counts (Caffe
/// `ShareData`'s check, at compile time).
#[diagnostic::on_unimplemented(
    message = "cannot share memory between {Self} and {Target}: element counts differ ({SelfCount} vs {TargetCount})",
    label = "element counts differ"
)]
pub trait ShareWith<
    Target: Shape,
    SelfCount = <Self as Shape>::CountName,
    TargetCount = <Target as Shape>::CountName,
>: Shape
{
}

#[diagnostic::do_not_recommend]
impl<S: Shape, T: Shape> ShareWith<T> for S where S: ReshapeInto<T> {}

/// `Self` has the same dims as `Target` (copy, axpy, a new name for the
/// same dims).
#[diagnostic::on_unimplemented(
    message = "shapes differ: {Self} is not {Target}",
    label = "expected a blob of shape {Target}"
)]
pub trait SameShapeAs<Target: Shape>: Shape {}

#[diagnostic::do_not_recommend]
impl<S: Shape, T: Shape> SameShapeAs<T> for S where S::Dims: SameAs<T::Dims> {}

/// `Self` is the same element type as `T`: no mixing of f32 and f64.
#[diagnostic::on_unimplemented(
    message = "cannot mix {Self} and {T} blobs: element types differ",
    label = "expected {T} elements"
)]
pub trait SameElement<T: Element>: Element {}

#[diagnostic::do_not_recommend]
impl<T: Element, U: Element> SameElement<T> for U where U: SameAs<T> {}

/// Caffe's legacy num/channels/height/width exist only for shapes of at
/// most 4 axes.
#[diagnostic::on_unimplemented(
    message = "legacy accessors need at most 4 axes, and {Self} has more",
    label = "num/channels/height/width are for blobs of up to 4 axes",
    note = "use shape_at(axis) or the STATIC_DIMS of the shape type instead"
)]
pub trait LegacyRank: Shape {}

#[diagnostic::do_not_recommend]
impl<S: Shape> LegacyRank for S where S::Dims: AtMostFour {}

/// Dim lists of at most 4 dims.
pub trait AtMostFour {}
impl AtMostFour for () {}
impl<A: Dim> AtMostFour for (A,) {}
impl<A: Dim, B: Dim> AtMostFour for (A, B) {}
impl<A: Dim, B: Dim, C: Dim> AtMostFour for (A, B, C) {}
impl<A: Dim, B: Dim, C: Dim, E: Dim> AtMostFour for (A, B, C, E) {}

/// `(N, C, H, W, ...)` flattens to `(N, C*H*W*...)` (Caffe's Flatten and
/// InnerProduct input).
#[diagnostic::on_unimplemented(
    message = "cannot flatten {Self}: it needs at least 2 axes, and every axis after the first static with compile-time arithmetic",
    label = "not flattenable",
    note = "a dim after the first must be a literal (any size) or a constant up to 4096; otherwise declare the flattened shape with `blob!(shape Name = ..)` and `reshape` into it (in a typed net, `ReshapeAs::<Name>`)"
)]
pub trait Flatten: Shape {
    /// `(first, product of the rest)`.
    #[doc(hidden)]
    type FlatDims: DimList;
}

#[diagnostic::do_not_recommend]
impl<S: Shape> Flatten for S
where
    S::Dims: FlattenDims,
{
    type FlatDims = <S::Dims as FlattenDims>::Output;
}

/// The shape [`TypedBlob::flatten`](crate::typed::TypedBlob::flatten)
/// returns: `S` with every axis after the first folded into one. Its dims
/// are the tuple `(first, product)`; `into_shape` gives the blob that
/// type (or a declared name), for free.
pub struct Flat<S>(PhantomData<fn() -> S>);

impl<S: Flatten> Shape for Flat<S> {
    type Dims = S::FlatDims;
    type Counts = S::Counts;
    type CountName = S::CountName;
}

/// The product of a dim list, as a dim (`Thousands` above 4096).
pub trait DimProduct {
    /// The product.
    type Product: Dim;
}

impl<A: Twin> DimProduct for (A,) {
    type Product = A;
}

macro_rules! dim_product {
    ($a:ident, $($rest:ident),+) => {
        impl<$a: Dim, $($rest: Dim),+> DimProduct for ($a, $($rest,)+)
        where
            ($($rest,)+): DimProduct,
            $a: DimMul<<($($rest,)+) as DimProduct>::Product>,
        {
            type Product = <$a as DimMul<<($($rest,)+) as DimProduct>::Product>>::Output;
        }
    };
}
dim_product!(A, B);
dim_product!(A, B, C);
dim_product!(A, B, C, E);
dim_product!(A, B, C, E, F);
dim_product!(A, B, C, E, F, G);

/// The dims of a flattened list.
pub trait FlattenDims {
    /// `(first, product of the rest)`.
    type Output: DimList;
}

macro_rules! flatten_dims {
    ($($t:ident),+) => {
        impl<A: Dim, $($t: Dim),+> FlattenDims for (A, $($t,)+)
        where
            ($($t,)+): DimProduct,
        {
            type Output = (A, <($($t,)+) as DimProduct>::Product);
        }
    };
}
flatten_dims!(B);
flatten_dims!(B, C);
flatten_dims!(B, C, E);
flatten_dims!(B, C, E, F);
flatten_dims!(B, C, E, F, G);
flatten_dims!(B, C, E, F, G, H);

/// `Self` (inputs, `(B, K)`) times the transpose of `W` (weights, `(N, K)`)
/// gives `(B, N)`: Caffe's InnerProduct with `transpose: false`.
#[diagnostic::on_unimplemented(
    message = "cannot multiply {Self} by weights {W}: K differs ({InputK} vs {WeightK})",
    label = "inner dims differ",
    note = "inputs must be (B, K) and weights (N, K) with the same K; flatten an (N, C, H, W) input first"
)]
pub trait InnerProductWith<
    W: Shape,
    InputK = <<Self as Shape>::Dims as DimList>::Last,
    WeightK = <<W as Shape>::Dims as DimList>::Last,
>: MatrixInput
{
}

#[diagnostic::do_not_recommend]
impl<X: Shape, W: Shape> InnerProductWith<W> for X
where
    X::Dims: Rank2,
    W::Dims: Rank2,
    <X::Dims as Rank2>::A1: SameAs<<W::Dims as Rank2>::A1>,
{
}

/// `Self` is `(B, K)`: what [`TypedBlob::inner_product`](crate::typed::TypedBlob::inner_product)
/// multiplies. An image batch is flattened first; the error says so
/// before it compares K.
#[diagnostic::on_unimplemented(
    message = "inner_product multiplies (B, K) inputs, but {Self} does not have 2 axes",
    label = "not (B, K)",
    note = "flatten an (N, C, H, W) input first (`flatten()`), then its K is C x H x W"
)]
pub trait MatrixInput: Shape {}

#[diagnostic::do_not_recommend]
impl<X: Shape> MatrixInput for X where X::Dims: Rank2 {}

/// [`InnerProductWith`] seen from the weights: what `inner_product`
/// requires, so that the compiler knows the weights' type before it
/// reports, and names it.
#[diagnostic::on_unimplemented(
    message = "cannot multiply {X} by weights {Self}: K differs ({InputK} vs {WeightK})",
    label = "inner dims differ",
    note = "inputs must be (B, K) and weights (N, K) with the same K; flatten an (N, C, H, W) input first"
)]
pub trait WeightsFor<
    X: Shape,
    InputK = <<X as Shape>::Dims as DimList>::Last,
    WeightK = <<Self as Shape>::Dims as DimList>::Last,
>: Shape
{
}

#[diagnostic::do_not_recommend]
impl<X: Shape, W: Shape> WeightsFor<X> for W where X: InnerProductWith<W> {}

/// The shape of `X` times weights `W`: `(B, N)`, the first dims of both.
/// Well-formed for any shapes, so that a failing
/// [`InnerProductWith`] is reported in its own words.
pub type InnerProductOut<X, W> = (
    <<X as Shape>::Dims as DimList>::First,
    <<W as Shape>::Dims as DimList>::First,
);
