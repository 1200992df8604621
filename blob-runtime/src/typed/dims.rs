//! Dims as types: `D<N>` for a dim known at compile time, [`Dyn`] for the
//! one known only at run time (the batch), and any type parameter bounded
//! by [`Dim`] in generic code.
//!
//! A dim is a const-generic type, so diagnostics print it as the number it
//! is (`expected D<32>, found D<16>`) and a named constant or a constant
//! expression is a dim too (`D<CLASSES>`, `D<{ H - 4 }>`).

mod sealed {
    pub trait Sealed {}
    impl<const N: usize> Sealed for super::D<N> {}
    impl Sealed for super::Dyn {}
}

/// One dim of a shape type: [`D<N>`](D) or [`Dyn`].
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

/// A dim whose value is known at compile time: every [`D<N>`](D), never
/// [`Dyn`].
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
