//! The output shapes of layers, computed from their input shapes at
//! compile time (stable Rust: the dims' typenum twins do the arithmetic,
//! for literal dims of any size and constants up to 4096).
//!
//! ```
//! use blob_layers::shapes::{ConvDim, PoolDim};
//! use blob_runtime::typed::D;
//! // 28 -> 24 under a 5x5 convolution, 24 -> 12 under 2x2/2 pooling.
//! let _: <D<28> as ConvDim<5, 1, 0>>::Out = D::<24>;
//! // Dilation 2 spreads a 3x3 kernel over 5x5: 28 -> 24, padded 2: 28.
//! let _: <D<28> as ConvDim<3, 1, 0, 2>>::Out = D::<24>;
//! let _: <D<28> as ConvDim<3, 1, 2, 2>>::Out = D::<28>;
//! let _: <D<24> as PoolDim<2, 2>>::Out = D::<12>;
//! // Caffe's ceil rule: 7 -> 3 under 3x3/2 pooling.
//! let _: <D<7> as PoolDim<3, 2>>::Out = D::<3>;
//! // With padding, Caffe's correction: a last window that would start in
//! // the padding is dropped (4 -> 2 under 3x3/3 pad 2).
//! let _: <D<5> as PoolDim<3, 2, 1>>::Out = D::<3>;
//! let _: <D<6> as PoolDim<2, 2, 1>>::Out = D::<4>;
//! let _: <D<28> as PoolDim<3, 1, 1>>::Out = D::<28>;
//! let _: <D<4> as PoolDim<3, 3, 2>>::Out = D::<2>;
//! ```

use blob_runtime::typed::typenum::{B0, B1, GrEq, IsGreaterOrEqual};
use blob_runtime::typed::{
    D, Dim, DimAdd, DimDiv, DimMul, DimSub, Minus, Over, Plus, Rank4, Shape, Times, Twin,
};

/// A convolution's output dim: `(H + 2P - E) / S + 1`, `E` the kernel's
/// extent `DIL (K - 1) + 1` (`K` without dilation).
#[diagnostic::on_unimplemented(
    message = "no convolution output for {Self} with kernel {K}, stride {S}, pad {P} and dilation {DIL} at compile time",
    label = "the input is smaller than the kernel, or a dim is dynamic or a constant above 4096",
    note = "a convolution's spatial dims must be static (a literal, or a constant up to 4096), and at least the kernel (with padding)"
)]
pub trait ConvDim<const K: usize, const S: usize, const P: usize, const DIL: usize = 1>:
    Dim
{
    /// The output dim.
    type Out: Dim;
}

type Padded<H, const P: usize> = Plus<H, Times<D<2>, D<P>>>;
/// A dilated kernel's extent: `DIL (K - 1) + 1`.
type Extent<const K: usize, const DIL: usize> = Plus<Times<D<DIL>, Minus<D<K>, D<1>>>, D<1>>;

// The diagnostic is the trait's own, naming the kernel, rather than a
// step of the arithmetic (`cannot subtract D<5> from D<4>`).
#[diagnostic::do_not_recommend]
impl<H: Dim, const K: usize, const S: usize, const P: usize, const DIL: usize> ConvDim<K, S, P, DIL>
    for H
where
    D<2>: DimMul<D<P>>,
    H: DimAdd<Times<D<2>, D<P>>>,
    D<K>: DimSub<D<1>>,
    D<DIL>: DimMul<Minus<D<K>, D<1>>>,
    Times<D<DIL>, Minus<D<K>, D<1>>>: DimAdd<D<1>>,
    Padded<H, P>: DimSub<Extent<K, DIL>>,
    Minus<Padded<H, P>, Extent<K, DIL>>: DimDiv<D<S>>,
    Over<Minus<Padded<H, P>, Extent<K, DIL>>, D<S>>: DimAdd<D<1>>,
{
    type Out = Plus<Over<Minus<Padded<H, P>, Extent<K, DIL>>, D<S>>, D<1>>;
}

/// `D<1>` when `Self >= Rhs`, `D<0>` otherwise: a comparison as a dim,
/// for formulas with a case in them.
pub trait AtLeast<Rhs: Dim>: Dim {
    /// `D<1>` or `D<0>`.
    type Bit: Dim;
}

/// A typenum bit as a dim.
pub trait BitDim {
    /// `D<1>` for `B1`, `D<0>` for `B0`.
    type Dim: Dim;
}

impl BitDim for B0 {
    type Dim = D<0>;
}

impl BitDim for B1 {
    type Dim = D<1>;
}

impl<A: Twin, B: Twin> AtLeast<B> for A
where
    A::T: IsGreaterOrEqual<B::T>,
    GrEq<A::T, B::T>: BitDim,
{
    type Bit = <GrEq<A::T, B::T> as BitDim>::Dim;
}

/// A pooling output dim, Caffe's rule exactly: `ceil((H + 2P - K) / S) +
/// 1`, one less when padding would make the last window start in the
/// padding.
#[diagnostic::on_unimplemented(
    message = "no pooling output for {Self} with kernel {K}, stride {S} and pad {P} at compile time",
    label = "the input is smaller than the window, or a dim is dynamic or a constant above 4096"
)]
pub trait PoolDim<const K: usize, const S: usize, const P: usize = 0>: Dim {
    /// The output dim.
    type Out: Dim;
}

/// `ceil((H + 2P - K) / S) + 1`, before Caffe's correction.
type PooledCeil<H, const K: usize, const S: usize, const P: usize> =
    Plus<Over<Plus<Minus<Padded<H, P>, D<K>>, Minus<D<S>, D<1>>>, D<S>>, D<1>>;
/// Whether the last window starts in the padding: `P > 0` and
/// `(pooled - 1) S >= H + P`.
type StartsInPadding<H, const K: usize, const S: usize, const P: usize> = Times<
    <D<P> as AtLeast<D<1>>>::Bit,
    <Times<Minus<PooledCeil<H, K, S, P>, D<1>>, D<S>> as AtLeast<Plus<H, D<P>>>>::Bit,
>;

#[diagnostic::do_not_recommend]
impl<H: Dim, const K: usize, const S: usize, const P: usize> PoolDim<K, S, P> for H
where
    D<2>: DimMul<D<P>>,
    H: DimAdd<Times<D<2>, D<P>>> + DimAdd<D<P>>,
    Padded<H, P>: DimSub<D<K>>,
    D<S>: DimSub<D<1>>,
    Minus<Padded<H, P>, D<K>>: DimAdd<Minus<D<S>, D<1>>>,
    Plus<Minus<Padded<H, P>, D<K>>, Minus<D<S>, D<1>>>: DimDiv<D<S>>,
    Over<Plus<Minus<Padded<H, P>, D<K>>, Minus<D<S>, D<1>>>, D<S>>: DimAdd<D<1>>,
    PooledCeil<H, K, S, P>: DimSub<D<1>>,
    Minus<PooledCeil<H, K, S, P>, D<1>>: DimMul<D<S>>,
    Times<Minus<PooledCeil<H, K, S, P>, D<1>>, D<S>>: AtLeast<Plus<H, D<P>>>,
    D<P>: AtLeast<D<1>>,
    <D<P> as AtLeast<D<1>>>::Bit:
        DimMul<<Times<Minus<PooledCeil<H, K, S, P>, D<1>>, D<S>> as AtLeast<Plus<H, D<P>>>>::Bit>,
    PooledCeil<H, K, S, P>: DimSub<StartsInPadding<H, K, S, P>>,
{
    type Out = Minus<PooledCeil<H, K, S, P>, StartsInPadding<H, K, S, P>>;
}

/// An `(N, C, H, W)` input's pooling output `(N, C, H', W')`.
#[diagnostic::on_unimplemented(
    message = "pooling with kernel {K}, stride {S} and pad {P} cannot take {Self}",
    label = "needs (N, C, H, W) with static H and W of at least the window"
)]
pub trait PoolShape<const K: usize, const S: usize, const P: usize = 0>: Shape {
    /// The output shape (a tuple of dims).
    type Out: Shape;
}

#[diagnostic::do_not_recommend]
impl<X: Shape, const K: usize, const S: usize, const P: usize> PoolShape<K, S, P> for X
where
    X::Dims: Rank4,
    <X::Dims as Rank4>::A2: PoolDim<K, S, P>,
    <X::Dims as Rank4>::A3: PoolDim<K, S, P>,
{
    type Out = (
        <X::Dims as Rank4>::A0,
        <X::Dims as Rank4>::A1,
        <<X::Dims as Rank4>::A2 as PoolDim<K, S, P>>::Out,
        <<X::Dims as Rank4>::A3 as PoolDim<K, S, P>>::Out,
    );
}

/// An `(N, C, H, W)` input's convolution output `(N, COUT, H', W')`.
#[diagnostic::on_unimplemented(
    message = "a convolution with kernel {K}, stride {S} and pad {P} cannot take {Self}",
    label = "needs (N, C, H, W) with static H and W of at least the kernel"
)]
pub trait ConvShape<const COUT: usize, const K: usize, const S: usize, const P: usize>:
    Shape
{
    /// The output shape (a tuple of dims).
    type Out: Shape;
}

#[diagnostic::do_not_recommend]
impl<X: Shape, const COUT: usize, const K: usize, const S: usize, const P: usize>
    ConvShape<COUT, K, S, P> for X
where
    X::Dims: Rank4,
    <X::Dims as Rank4>::A2: ConvDim<K, S, P>,
    <X::Dims as Rank4>::A3: ConvDim<K, S, P>,
{
    type Out = (
        <X::Dims as Rank4>::A0,
        D<COUT>,
        <<X::Dims as Rank4>::A2 as ConvDim<K, S, P>>::Out,
        <<X::Dims as Rank4>::A3 as ConvDim<K, S, P>>::Out,
    );
}

/// The dims of a convolution's output.
pub type ConvOut<X, const COUT: usize, const K: usize, const S: usize, const P: usize> =
    <X as ConvShape<COUT, K, S, P>>::Out;
