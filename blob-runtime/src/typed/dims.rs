//! Dims as types: typenum unsigned integers for dims known at compile time,
//! [`Dyn`] for the one dim known only at run time (the batch), and any type
//! parameter bounded by [`Dim`] in generic code.

use typenum::{U0, U1, Unsigned};

/// One dim of a shape type.
///
/// Implemented for every typenum unsigned integer (what `blob!` writes for
/// a literal) and for [`Dyn`]. Generic layer code takes dims as type
/// parameters: `fn ip<B: Dim, K: Dim, N: Dim>(...)`.
///
/// ```
/// use blob_runtime::typed::{Dim, Dyn};
/// assert_eq!(<typenum::U28 as Dim>::VALUE, 28);
/// assert!(<Dyn as Dim>::IS_DYNAMIC);
/// ```
pub trait Dim: 'static + Send + Sync {
    /// The dim's value; 0 for [`Dyn`] (its value lives in the blob).
    const VALUE: usize;
    /// Whether the value is known only at run time.
    const IS_DYNAMIC: bool;
    /// The dim as a factor of the static element count (1 for [`Dyn`]).
    type Static: Unsigned;
    /// 1 for [`Dyn`], 0 otherwise: how many dynamic dims this dim adds.
    type Dynamic: Unsigned;
}

impl<U: Unsigned + 'static + Send + Sync> Dim for U {
    const VALUE: usize = U::USIZE;
    const IS_DYNAMIC: bool = false;
    type Static = U;
    type Dynamic = U0;
}

/// A dim known only at run time, written `_` in `blob!`: typically the
/// batch. Its value is checked once, when the blob is made.
///
/// ```
/// use blob_runtime::typed::{Dim, Dyn};
/// assert_eq!(<Dyn as Dim>::VALUE, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dyn;

impl Dim for Dyn {
    const VALUE: usize = 0;
    const IS_DYNAMIC: bool = true;
    type Static = U1;
    type Dynamic = U1;
}

/// A literal dim as diagnostics print it: `D<64>`. Only a name; the
/// arithmetic happens on typenum integers.
///
/// ```
/// let _readable: blob_runtime::typed::D<64> = blob_runtime::typed::D;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct D<const N: usize>;
