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
//! Depend on this crate: it is the one meant for users, and it re-exports
//! the crates underneath, which exist so that each holds one concern and
//! builds on its own:
//! - [`runtime`] (`blob-runtime`): `Blob`, `SyncedMemory`, typed blobs and
//!   `blob!`, devices, errors, Caffe files;
//! - [`layers`] (`blob-layers`): Caffe's layers, fillers, the SGD solver
//!   and LeNet;
//! - [`kernels`] (`blob-kernels`): Caffe's math functions on slices (CPU)
//!   and device buffers (CUDA);
//! - [`proto`] (`blob-proto`): Caffe's protobuf messages;
//! - `data` (`blob-data`, feature `data`): Caffe's `Data` layer reading
//!   LMDB stores, `transform_param`, prefetching.
//!
//! Features, all off by default:
//! - `cuda`: GPU blobs, math and layers through cudarc, loaded at run time,
//!   so a build with it still runs where there is no GPU;
//! - `ndarray`: `Blob::with_array`/`to_array`/`from_array`, and typed blobs'
//!   views with the fixed dimension type of their rank;
//! - `safetensors`: `CaffeModel::save_safetensors`, `TensorFile` to load
//!   tensors into (typed) blobs with their shapes checked;
//! - `data`: the data layers that read Caffe's stores (LMDB's C library
//!   and JPEG/PNG decoders are built with it).
//!
//! Data moves in and out without one: [`Blob::from_vec`] adopts a `Vec`,
//! [`Blob::to_vec`] copies one out, and `cpu_data` is a slice.
//! The `blobflow` command (`train`, `test`, `time`, `device-query`,
//! `run`, `inspect`, `convert`) is the `blobflow-cli` package.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod typed;

pub use blob_runtime::blob;

#[cfg(feature = "data")]
#[cfg_attr(docsrs, doc(cfg(feature = "data")))]
pub use blob_data as data;
pub use blob_kernels as kernels;
pub use blob_layers as layers;
pub use blob_proto as proto;
pub use blob_runtime as runtime;

pub use blob_runtime::{
    Blob, BlobError, CaffeModel, DeviceBackend, DeviceError, Element, Head, HostBuffer,
    MathElement, ShapeError, SyncedMemory, check_host_room, host_memory_in_use, host_memory_limit,
    set_host_memory_limit,
};
#[cfg(feature = "safetensors")]
pub use blob_runtime::{TensorFile, TensorInfo, TensorNames, write_tensors};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The names most programs need: `use blobflow::prelude::*;`.
pub mod prelude {
    pub use crate::blob;
    pub use crate::typed::{D, Dim, Dyn, TypedBlob};
    pub use blob_kernels::Real;
    pub use blob_runtime::{
        Blob, BlobError, CaffeModel, Element, Head, HostBuffer, MathElement, SyncedMemory,
    };
}
