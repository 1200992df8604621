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
