//! Typed blobs: shapes as types, checked by the compiler.
//!
//! [`TypedBlob<T, S>`] is a [`crate::Blob`] whose shape is the type `S`: a
//! tuple of dims (`(D<64>, D<3>)`, what `blob!(f32; 64, 3)` writes) or a
//! shape declared with `blob!(pub shape Name = ..)`. A dim is [`D<N>`](D)
//! when known at compile time, [`Dyn`] for the batch known at run time, or
//! a type parameter bounded by [`Dim`] in generic code. Relations between
//! shapes ([`ReshapeInto`], [`SameShapeAs`], [`ShareWith`], [`Flatten`],
//! [`InnerProductWith`], [`LegacyRank`], [`SameElement`], [`Within`]) are
//! traits whose errors name the shapes and the numbers that disagree.
//!
//! The guide, `blobflow::typed`, shows each error a wrong program gets.
//!
//! ```
//! use blob_runtime::blob;
//! let a = <blob!(f32; 2, 3)>::new()?;
//! let flat: blob!(f32; 6) = a.reshape();
//! assert_eq!(flat.count(), 6);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

pub(crate) mod blob;
mod dims;
mod relations;
mod shape;
mod twin;

pub use crate::error::ShapeError;
pub use blob::TypedBlob;
pub use dims::{D, Dim, Dyn, StaticDim, Thousands};
pub use relations::{
    AtMostFour, CountKnown, DimProduct, Flat, Flatten, FlattenDims, InnerProductOut,
    InnerProductWith, LegacyRank, MatrixInput, ReshapeFrom, ReshapeInto, SameAs, SameElement,
    SameShapeAs, ShareWith, WeightsFor,
};
pub use shape::{
    AllStatic, CountFactor, CountOf, Counted, CountedAs, DimList, Rank2, Rank4, Shape, StaticShape,
    strides,
};
pub use twin::{
    Axis, DimAdd, DimDiv, DimMul, DimSub, FromTwin, Idx, Magnitude, Minus, Over, Plus,
    SplitThousands, TWIN_MAX, TableDim, Times, True, Twin, Within, table,
};

/// typenum, re-exported for the counts `blob!` writes for named shapes;
/// hidden, as no user writes its types (its thousands of items would
/// bury the crate's own in the docs). A hidden module rather than a
/// hidden `pub use typenum;`: rustdoc inlined the crate re-export into
/// the facade's docs all the same (7,056 of its 7,143 pages).
#[doc(hidden)]
pub mod typenum {
    pub use ::typenum::*;
}

/// Statically shaped blob types.
///
/// - `blob!(f32; 64, 3, 32, 32)` is the type of a blob of that shape: a
///   [`TypedBlob`] whose count, strides and offsets are constants.
/// - `blob!(f32; _, 1, 28, 28)`: `_` is one dim known at run time (the
///   batch), checked once when the blob is made.
/// - `blob!(f32; B, K)` inside `fn ip<B: Dim, K: Dim>(..)`: generic dims;
///   it stands for any blob with those dims (`impl Shape<Dims = (B, K)>`),
///   so it is written where `impl Trait` is allowed: argument and return
///   types of functions.
/// - `blob!(pub shape Conv1Out = 64, 20, 24, 24);` declares a named shape
///   `Conv1Out` (use it as `TypedBlob<f32, Conv1Out>`); diagnostics then say
///   `Conv1Out`. Dims may carry names, `n: _, c: 20, h: 24, w: 24`, which
///   become axis constants (`Conv1Out::C == 1`).
///
/// The macro rejects, at the offending token: more than 32 axes, an element
/// count that overflows `usize`, duplicate dim names, more than one `_`,
/// and anything that is not a dim.
///
/// The types it writes are named through the crate `blob!` was reached by
/// (`$crate`), so it works from a crate that depends on `blob-runtime`
/// alone, on `blobflow` under any name, or on a crate re-exporting either.
///
/// ```
/// use blob_runtime::blob;
/// blob!(pub shape Pair = 2, 3);
/// let b = <blob!(f32; 2, 3)>::new()?;
/// let named: blob_runtime::typed::TypedBlob<f32, Pair> = b.into_shape();
/// assert_eq!(named.count(), 6);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[macro_export]
macro_rules! blob {
    ($($input:tt)*) => {
        $crate::__private::blob_with_crate! { $crate; $($input)* }
    };
}
