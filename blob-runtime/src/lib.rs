//! The runtime of blobflow: Caffe's `SyncedMemory` and `Blob`, with Caffe's
//! semantics and Rust's safety.
//!
//! - [`SyncedMemory`]: one buffer mirrored between host and device, with
//!   Caffe's four-state [`Head`] and lazy, zero-filled allocation.
//! - [`Blob`]: an N-D array of data and diff over two `SyncedMemory`s,
//!   grow-only reshape, Caffe's shape queries, `update`, `asum`, `sumsq`,
//!   `scale`, sharing and copying.
//! - [`CaffeModel`], [`Blob::from_proto`], [`Blob::to_proto`]: Caffe's
//!   files, read and written bit-exactly.
//! - [`DeviceBackend`]: what a GPU provides; the CUDA one is behind the
//!   `cuda` feature.
//! - [`typed`] and [`blob!`]: shapes as types, checked by the compiler.
//! - Data in and out: [`Blob::from_vec`], [`Blob::to_vec`]; NumPy files
//!   ([`npy`]); ndarray views
//!   (feature `ndarray`); `.safetensors` files (feature `safetensors`);
//!   DLPack, shared with PyTorch, NumPy, JAX and CuPy without a copy
//!   ([`Blob::to_dlpack`], [`Blob::from_dlpack`], feature `dlpack`);
//!   candle tensors (`TryFrom`, feature `candle`); burn's tensor data
//!   (`TryFrom`, feature `burn`).
//!
//! Most users depend on `blobflow`, which re-exports this crate as
//! `blobflow::runtime` with the layers and kernels beside it; depend on this
//! crate alone for blobs, typed shapes and Caffe files without the layers.
//!
//! Where blobflow deliberately differs from Caffe: counts are `usize`;
//! offsets are strictly bounds-checked; capacity is honest after sharing;
//! zero counts are valid everywhere; every Caffe abort is a [`BlobError`].
//!
//! ```
//! use blob_runtime::{Blob, Head};
//! let blob = Blob::<f32>::new(&[2, 3])?;
//! assert_eq!(blob.data_head(), Head::Uninitialized);
//! blob.mutable_cpu_data()?.fill(2.0);
//! assert_eq!(blob.asum_data()?, 12.0);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod atomic_file;
mod blob;
#[cfg(feature = "cuda")]
pub mod cuda;
mod device;
mod element;
mod error;
mod head;
mod host_buffer;
pub mod host_device;
mod host_limit;
#[cfg(feature = "ndarray")]
mod ndarray_views;
pub mod npy;
mod proto;
mod synced_memory;
#[cfg(feature = "safetensors")]
mod tensor_file;
pub mod typed;
mod weights;

#[cfg(test)]
mod tests;

/// What `blob!` expands to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use blob_macros::blob_with_crate;
}

pub use atomic_file::{PARTIAL_MARK, write_atomically};
#[cfg(feature = "dlpack")]
pub use blob::DlpackAccess;
pub use blob::{Blob, CpuMut, CpuRef, MAX_BLOB_AXES, shape_string};
/// The burn crate the `burn` feature speaks through (burn's
/// `burn::tensor`), so a user names the same `TensorData`.
#[cfg(feature = "burn")]
pub use burn_tensor;
pub use device::{DeviceBackend, DeviceBuffer, DeviceFence, DeviceStream, Precision};
/// The DLPack crate the `dlpack` feature speaks through, so a user names
/// the same `Managed`, `DlpackFlags` and `ffi` types.
#[cfg(feature = "dlpack")]
pub use dlpark;
pub use element::{Element, MathElement};
pub use error::{BlobError, DeviceError, Result, ShapeError};
pub use head::Head;
pub use host_buffer::{HOST_ALIGN, HostBuffer};
pub use host_limit::{
    check_host_room, host_memory_in_use, host_memory_limit, set_host_memory_limit,
};
#[cfg(feature = "ndarray")]
pub use ndarray_views::NdRank;
pub use proto::{
    FILE_LIMIT, encode_proto, proto_shape, read_blob_file, read_file, read_text_file,
    write_blob_file,
};
pub use synced_memory::{DeviceRead, DeviceWrite, HostRead, HostWrite, SyncedMemory};
#[cfg(feature = "safetensors")]
pub use tensor_file::{TensorFile, TensorInfo, TensorNames, write_tensors};
pub use weights::{CaffeModel, CopyReport, read_solver_state, write_solver_state};
