//! # Typed blobs
//!
//! A shape can be a type. `blob!(f32; 64, 3, 32, 32)` is the type of a blob
//! of that shape: its count, strides and offsets are constants, and
//! operations between blobs check their shapes when the program compiles.
//! Underneath is the same [`Blob`](crate::Blob) and `SyncedMemory`: every
//! runtime method works (through `Deref`), and [`TypedBlob::into_dyn`] is
//! free.
//!
//! ```
//! use blobflow::{blob, typed::*};
//!
//! blob!(pub shape Conv1Out = 64, 20, 24, 24);
//!
//! type Input = blob!(f32; _, 1, 28, 28); // batch known at run time
//! let x = Input::with_dynamic(64)?;
//! assert_eq!(x.shape(), &[64, 1, 28, 28]);
//!
//! let c = TypedBlob::<f32, Conv1Out>::new()?;
//! assert_eq!(TypedBlob::<f32, Conv1Out>::COUNT, 64 * 20 * 24 * 24);
//! const OFF: usize = <blob!(f32; 64, 20, 24, 24)>::static_offset(&[1, 2, 3, 4]);
//! assert_eq!(c.offset([1, 2, 3, 4]), OFF);
//! // Derived results (flatten, inner_product) carry a derived name; give
//! // them a declared one of the same dims with `into_shape`, for free.
//! let flat: blob!(f32; 64, 11520) = c.flatten().into_shape();
//! # Ok::<(), blobflow::BlobError>(())
//! ```
//!
//! ## What the compiler refuses, and what it says
//!
//! Each relation between shapes is a trait of this crate; its error names
//! the shapes, by their declared name or by their dims (`D<64>` is a dim
//! of 64, `Dyn` one known at run time).
//!
//! **Reshape to a different count**: `cannot reshape (D<2>, D<3>) into
//! (D<7>,): element counts differ`.
//!
//! ```compile_fail
//! use blobflow::blob;
//! let a = <blob!(f32; 2, 3)>::new().unwrap();
//! let b: blob!(f32; 7) = a.reshape();
//! ```
//!
//! **Copy between different shapes**: `shapes differ: (D<3>, D<2>) is not
//! (D<2>, D<3>)`.
//!
//! ```compile_fail
//! use blobflow::blob;
//! let mut a = <blob!(f32; 2, 3)>::new().unwrap();
//! let b = <blob!(f32; 3, 2)>::new().unwrap();
//! a.copy_from(&b, false).unwrap();
//! ```
//!
//! **Share memory with a different count**: `cannot share memory between
//! (D<5>,) and (D<6>,): element counts differ`.
//!
//! ```compile_fail
//! use blobflow::blob;
//! let mut a = <blob!(f32; 6)>::new().unwrap();
//! let b = <blob!(f32; 5)>::new().unwrap();
//! a.share_data(&b).unwrap();
//! ```
//!
//! **Mix f32 and f64**: `cannot mix f64 and f32 blobs: element types
//! differ`.
//!
//! ```compile_fail
//! use blobflow::blob;
//! let mut a = <blob!(f32; 2)>::new().unwrap();
//! let b = <blob!(f64; 2)>::new().unwrap();
//! a.copy_from(&b, false).unwrap();
//! ```
//!
//! **Inner product with mismatched K**: `cannot multiply (D<8>, D<800>) by
//! weights (D<500>, D<801>): inputs must be (B, K) and weights (N, K) with
//! the same K`.
//!
//! ```compile_fail
//! use blobflow::blob;
//! let x = <blob!(f32; 8, 800)>::new().unwrap();
//! let w = <blob!(f32; 500, 801)>::new().unwrap();
//! let y = x.inner_product(&w).unwrap();
//! ```
//!
//! **Legacy accessors on more than 4 axes**: `legacy accessors need at
//! most 4 axes, and (D<1>, D<2>, D<3>, D<4>, D<5>) has more`.
//!
//! ```compile_fail
//! use blobflow::blob;
//! let a = <blob!(f32; 1, 2, 3, 4, 5)>::new().unwrap();
//! a.num();
//! ```
//!
//! **Flatten a 1-axis shape**: `cannot flatten (D<6>,): it needs at least
//! 2 axes, and every axis after the first static`.
//!
//! ```compile_fail
//! use blobflow::blob;
//! let a = <blob!(f32; 6)>::new().unwrap();
//! a.flatten();
//! ```
//!
//! **Make a blob with a dynamic dim without its value**: `(Dyn, D<3>) has
//! a dynamic dim: make it with `with_dynamic(n)` or `from_shape(..)``.
//!
//! ```compile_fail
//! use blobflow::blob;
//! let a = <blob!(f32; _, 3)>::new().unwrap();
//! ```
//!
//! **An index out of bounds, at build time**: `data_at4: index 1 out of
//! bounds` (a constant-evaluation error, reported by `cargo build`).
//!
//! ```compile_fail
//! use blobflow::blob;
//! let a = <blob!(f32; 1, 2, 3, 3)>::new().unwrap();
//! a.data_at4::<0, 2, 0, 0>();
//! ```
//!
//! **Macro input errors**, at the offending token: more than 32 axes, a
//! count overflowing `usize`, duplicate dim names, two `_`, and anything
//! that is not a dim.
//!
//! ```compile_fail
//! type T = blobflow::blob!(f32; 4294967296, 4294967296);
//! // error: the element count overflows usize at this dim
//! ```
//!
//! ```compile_fail
//! type T = blobflow::blob!(f32; n: 2, n: 3);
//! // error: duplicate dim name `n`
//! ```
//!
//! ```compile_fail
//! type T = blobflow::blob!(f32; _, _);
//! // error: at most one dim can be `_`
//! ```

pub use blob_runtime::blob;
pub use blob_runtime::typed::*;
