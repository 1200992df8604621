//! # blobflow
//!
//! Caffe's `Blob` and `SyncedMemory` rebuilt in Rust: lazily allocated,
//! zero-filled buffers mirrored between CPU and GPU, grow-only reshape, data
//! and diff, `update`, `asum`/`sumsq`/`scale`, with every Caffe abort turned
//! into an error that names the operation and the shapes.
//!
//! ```
//! use blobflow::prelude::*;
//!
//! let mut weights = Blob::<f32>::new(&[20, 1, 5, 5])?;
//! weights.mutable_cpu_data()?.fill(0.5);
//! weights.mutable_cpu_diff()?.fill(0.25);
//! weights.update()?; // data -= diff
//! assert_eq!(weights.asum_data()?, 500.0 * 0.25);
//! weights.reshape(&[20, 25])?; // same count: nothing reallocated
//! assert_eq!(weights.shape_string(), "20 25 (500)");
//! # Ok::<(), blobflow::BlobError>(())
//! ```
//!
//! The crates underneath, re-exported here:
//! - [`runtime`] (`blob-runtime`): `Blob`, `SyncedMemory`, devices, errors;
//! - [`kernels`] (`blob-kernels`): Caffe's math functions on slices;
//! - [`proto`] (`blob-proto`): Caffe's protobuf messages and model files.

extern crate self as blobflow;

pub mod inspect;
pub mod mnist;
pub mod nn;
pub mod typed;

pub use blob_macros::blob;

pub use blob_kernels as kernels;
pub use blob_proto as proto;
pub use blob_runtime as runtime;

pub use blob_runtime::{
    Blob, BlobError, CaffeModel, DeviceBackend, Element, Head, HostBuffer, MathElement,
    SyncedMemory,
};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The names most programs need: `use blobflow::prelude::*;`.
pub mod prelude {
    pub use crate::blob;
    pub use crate::typed::{Dim, Dyn, TypedBlob};
    pub use blob_kernels::Real;
    pub use blob_runtime::{
        Blob, BlobError, CaffeModel, Element, Head, HostBuffer, MathElement, SyncedMemory,
    };
}
