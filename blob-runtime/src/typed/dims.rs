//! Dims as types: `D<N>` for a dim known at compile time, [`Dyn`] for the
//! one known only at run time (the batch), and any type parameter bounded
//! by [`Dim`] in generic code.
//!
//! A dim is a const-generic type, so diagnostics print it as the number it
//! is (`expected D<32>, found D<16>`) and a named constant or a constant
//! expression is a dim too (`D<CLASSES>`, `D<{ H - 4 }>`).

use std::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
    impl<const N: usize> Sealed for super::D<N> {}
    impl<Hi, Lo> Sealed for super::Thousands<Hi, Lo> {}
    impl Sealed for super::Dyn {}
}

/// One dim of a shape type: [`D<N>`](D), [`Thousands`] (a literal above
/// 4096) or [`Dyn`].
///
/// Generic code takes dims as type parameters: `fn ip<B: Dim, K: Dim>(..)`.
///
/// ```
/// use blob_runtime::typed::{D, Dim, Dyn};
/// assert_eq!(<D<28> as Dim>::STATIC, Some(28));
/// assert_eq!(<Dyn as Dim>::STATIC, None);
/// ```
pub trait Dim: sealed::Sealed + Copy + Default + 'static + Send + Sync {
    /// The value when it is known at compile time; `None` for [`Dyn`],
    /// whose value lives in the blob.
    const STATIC: Option<usize>;
}

/// A dim known at compile time: `D<64>` is a dim of 64. `blob!` writes it
/// for a literal (`64`), a constant (`CLASSES`) or a constant expression
/// (`{ H - 4 }`).
///
/// ```
/// use blob_runtime::typed::{D, StaticDim};
/// assert_eq!(<D<64> as StaticDim>::VALUE, 64);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct D<const N: usize>;

impl<const N: usize> Dim for D<N> {
    const STATIC: Option<usize> = Some(N);
}

/// A dim above 4096 known at compile time, as `blob!` writes a literal
/// above 4096 and as compile-time arithmetic gives a result above it:
/// `Thousands<Hi, Lo>` is `Hi * 1000 + Lo`, so diagnostics print 25088
/// (VGG's flattened pool5) as `Thousands<D<25>, D<88>>`.
///
/// Stable Rust cannot turn a const generic into a type, so `D<N>` has
/// compile-time arithmetic only up to 4096, through a table; a number
/// above it is kept as digits in base 1000, each within the table, and
/// every relation (reshape counts, Flatten, Concat, the layers' shape
/// rules) works on it as on any dim. `blob!` writes it for you: write
/// `blob!(f32; _, 25088)`, not the type. A named constant above 4096
/// (`blob!(f32; _, FC6)`) or a layer's const parameter above it
/// (`Fc::<21841>`'s output) stays a `D<N>`, which has no compile-time
/// arithmetic (stable Rust cannot take a const generic apart).
///
/// ```
/// use blob_runtime::blob;
/// use blob_runtime::typed::{D, StaticDim, Thousands};
/// assert_eq!(<Thousands<D<25>, D<88>> as StaticDim>::VALUE, 25088);
/// // A flattened pool5 of VGG reshaped to the same count, at compile time.
/// let pool5 = <blob!(f32; 2, 512, 7, 7)>::new()?;
/// let flat: blob!(f32; 2, 25088) = pool5.reshape();
/// assert_eq!(flat.shape(), &[2, 25088]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Thousands<Hi, Lo>(PhantomData<fn() -> (Hi, Lo)>);

impl<Hi: StaticDim, Lo: StaticDim> Dim for Thousands<Hi, Lo> {
    const STATIC: Option<usize> = Some(Hi::VALUE * 1000 + Lo::VALUE);
}

impl<Hi: StaticDim, Lo: StaticDim> StaticDim for Thousands<Hi, Lo> {
    const VALUE: usize = Hi::VALUE * 1000 + Lo::VALUE;
}

/// A dim known only at run time, written `_` in `blob!`: typically the
/// batch. Its value is checked once, when the blob is made.
///
/// ```
/// use blob_runtime::typed::{Dim, Dyn};
/// assert!(<Dyn as Dim>::STATIC.is_none());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dyn;

impl Dim for Dyn {
    const STATIC: Option<usize> = None;
}

/// A dim whose value is known at compile time: every [`D<N>`](D) and
/// [`Thousands`], never [`Dyn`].
///
/// ```
/// fn channels<C: blob_runtime::typed::StaticDim>() -> usize { C::VALUE }
/// assert_eq!(channels::<blob_runtime::typed::D<3>>(), 3);
/// ```
#[diagnostic::on_unimplemented(
    message = "{Self} is not a static dim: its value is known only at run time",
    label = "needs a dim known at compile time"
)]
pub trait StaticDim: Dim {
    /// The value.
    const VALUE: usize;
}

impl<const N: usize> StaticDim for D<N> {
    const VALUE: usize = N;
}
