//! Typed blobs: shapes as types, checked by the compiler.
//!
//! [`TypedBlob<T, S>`] is a [`crate::Blob`] whose shape is the type `S`.
//! Dims known at compile time are typenum integers, the batch can be
//! [`Dyn`], and generic code takes dims as type parameters bounded by
//! [`Dim`]. Relations between shapes ([`ReshapeInto`], [`SameShapeAs`],
//! [`ShareWith`], [`Flatten`], [`InnerProductWith`], [`LegacyRank`],
//! [`SameElement`]) are traits whose errors name the shapes.
//!
//! The `blob!` macro of the `blobflow` crate writes these types; its guide,
//! `blobflow::typed`, shows each error a wrong program gets.
//!
//! ```
//! use blob_runtime::typed::{Shp, TypedBlob, D};
//! use typenum::{U2, U3, U6};
//! let a = TypedBlob::<f32, Shp<(U2, U3), (D<2>, D<3>)>>::new()?;
//! let flat: TypedBlob<f32, Shp<(U6,), (D<6>,)>> = a.reshape();
//! assert_eq!(flat.count(), 6);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

mod blob;
mod dims;
mod relations;
mod shape;

pub use blob::{ShapeError, TypedBlob};
pub use dims::{D, Dim, Dyn};
pub use relations::{
    AtMostFour, Flat, FlatOf, Flatten, FlattenDims, InnerProductDims, InnerProductOf,
    InnerProductOut, InnerProductWith, LegacyRank, ReshapeInto, SameAs, SameElement, SameShapeAs,
    ShareWith, StaticShape,
};
pub use shape::{Counted, DimList, Shape, Shp, strides};

/// typenum, re-exported for the types `blob!` writes.
pub use typenum;

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
