//! What may be done between shapes, checked by the compiler.
//!
//! Each relation is a sealed trait of this crate with a blanket impl whose
//! conditions are typenum equalities. `#[diagnostic::on_unimplemented]`
//! words the error in terms of the shapes' names (`(D<64>, D<3>, D<32>,
//! D<32>)` or a declared `Conv1Out`), and `#[diagnostic::do_not_recommend]`
//! keeps rustc from reporting the typenum condition underneath instead.

use super::dims::Dim;
use super::shape::{Counted, DimList, Shape};
use crate::element::Element;

mod sealed {
    pub trait Sealed<T: ?Sized> {}
    impl<A: ?Sized, T: ?Sized> Sealed<T> for A {}
}

/// Type equality, the building block of the relations.
pub trait SameAs<T>: sealed::Sealed<T> {}
impl<T> SameAs<T> for T {}

/// `Self` can be reshaped into `Target`: equal element counts (and the same
/// number of dynamic dims, whose value carries over).
#[diagnostic::on_unimplemented(
    message = "cannot reshape {SelfName} into {TargetName}: element counts differ",
    label = "element counts differ",
    note = "reshape keeps every element, so both shapes need the same product of dims"
)]
pub trait ReshapeInto<
    Target: Shape,
    SelfName = <Self as Shape>::Name,
    TargetName = <Target as Shape>::Name,
>: Shape
{
}

#[diagnostic::do_not_recommend]
impl<S: Shape, T: Shape> ReshapeInto<T> for S
where
    S::Dims: Counted,
    T::Dims: Counted,
    <S::Dims as Counted>::Count: SameAs<<T::Dims as Counted>::Count>,
    <S::Dims as Counted>::DynRank: SameAs<<T::Dims as Counted>::DynRank>,
{
}

/// `Self` and `Target` share memory: equal element counts (Caffe
/// `ShareData`'s check, at compile time).
#[diagnostic::on_unimplemented(
    message = "cannot share memory between {SelfName} and {TargetName}: element counts differ",
    label = "element counts differ"
)]
pub trait ShareWith<
    Target: Shape,
    SelfName = <Self as Shape>::Name,
    TargetName = <Target as Shape>::Name,
>: Shape
{
}

#[diagnostic::do_not_recommend]
impl<S: Shape, T: Shape> ShareWith<T> for S where S: ReshapeInto<T> {}

/// `Self` has the same dims as `Target` (copy, axpy, swap of data).
#[diagnostic::on_unimplemented(
    message = "shapes differ: {SelfName} is not {TargetName}",
    label = "expected a blob of shape {TargetName}"
)]
pub trait SameShapeAs<
    Target: Shape,
    SelfName = <Self as Shape>::Name,
    TargetName = <Target as Shape>::Name,
>: Shape
{
}

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
    message = "legacy accessors need at most 4 axes, and {SelfName} has more",
    label = "num/channels/height/width are for blobs of up to 4 axes",
    note = "use shape_at(axis) or the DIMS of the shape type instead"
)]
pub trait LegacyRank<SelfName = <Self as Shape>::Name>: Shape {}

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
    message = "cannot flatten {SelfName}: it needs at least 2 axes, and every axis after the first static",
    label = "not flattenable"
)]
pub trait Flatten<SelfName = <Self as Shape>::Name>: Shape {}

/// The dims of a flattened list.
pub trait FlattenDims {
    /// `(first, product of the rest)`.
    type Output: DimList;
}

macro_rules! flatten_dims {
    ($($t:ident),+) => {
        impl<A: Dim, $($t: Dim),+> FlattenDims for (A, $($t,)+)
        where
            ($($t,)+): Counted<DynRank = typenum::U0>,
            <($($t,)+) as Counted>::Count: 'static + Send + Sync,
        {
            type Output = (A, <($($t,)+) as Counted>::Count);
        }
    };
}
flatten_dims!(B);
flatten_dims!(B, C);
flatten_dims!(B, C, E);
flatten_dims!(B, C, E, F);
flatten_dims!(B, C, E, F, G);
flatten_dims!(B, C, E, F, G, H);

/// Diagnostic name of a flattened shape: `Flat<(D<64>, D<50>, D<4>, D<4>)>`.
pub struct Flat<N>(std::marker::PhantomData<fn() -> N>);

#[diagnostic::do_not_recommend]
impl<S: Shape> Flatten for S where S::Dims: FlattenDims {}

/// The shape [`crate::typed::TypedBlob::flatten`] returns: `S` with every
/// axis after the first folded into one. Convert it to a declared shape of
/// the same dims with `into_shape`.
pub struct FlatOf<S>(std::marker::PhantomData<fn() -> S>);

impl<S: Shape> Shape for FlatOf<S>
where
    S::Dims: FlattenDims,
{
    type Dims = <S::Dims as FlattenDims>::Output;
    type Name = Flat<S::Name>;
}

/// `Self` (inputs, `(B, K)`) times the transpose of `W` (weights, `(N, K)`)
/// gives `(B, N)`: Caffe's InnerProduct with `transpose: false`.
#[diagnostic::on_unimplemented(
    message = "cannot multiply {SelfName} by weights {WeightName}: inputs must be (B, K) and weights (N, K) with the same K",
    label = "inner dims differ"
)]
pub trait InnerProductWith<
    W: Shape,
    SelfName = <Self as Shape>::Name,
    WeightName = <W as Shape>::Name,
>: Shape
{
}

/// Diagnostic name of an inner product's output.
pub struct InnerProductOut<X, W>(std::marker::PhantomData<fn() -> (X, W)>);

/// The dims relation under [`InnerProductWith`].
pub trait InnerProductDims<W> {
    /// `(B, N)`.
    type Output: DimList;
}

impl<B: Dim, K: Dim, N: Dim, K2: Dim> InnerProductDims<(N, K2)> for (B, K)
where
    K: SameAs<K2>,
{
    type Output = (B, N);
}

#[diagnostic::do_not_recommend]
impl<X: Shape, W: Shape> InnerProductWith<W> for X where X::Dims: InnerProductDims<W::Dims> {}

/// The shape [`crate::typed::TypedBlob::inner_product`] returns: `(B, N)`
/// from inputs `(B, K)` and weights `(N, K)`.
pub struct InnerProductOf<X, W>(std::marker::PhantomData<fn() -> (X, W)>);

impl<X: Shape, W: Shape> Shape for InnerProductOf<X, W>
where
    X::Dims: InnerProductDims<W::Dims>,
{
    type Dims = <X::Dims as InnerProductDims<W::Dims>>::Output;
    type Name = InnerProductOut<X::Name, W::Name>;
}

/// Every dim is static: the blob can be made without run-time dims.
#[diagnostic::on_unimplemented(
    message = "{SelfName} has a dynamic dim: make it with `with_dynamic(n)` or `from_shape(..)`",
    label = "needs its dynamic dim's value"
)]
pub trait StaticShape<SelfName = <Self as Shape>::Name>: Shape {}

#[diagnostic::do_not_recommend]
impl<S: Shape> StaticShape for S where S::Dims: Counted<DynRank = typenum::U0> {}
