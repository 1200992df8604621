#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod typed;

pub use blob_runtime::blob;

#[cfg(feature = "data")]
#[cfg_attr(docsrs, doc(cfg(feature = "data")))]
pub use blob_data as data;
#[doc(inline)]
pub use blob_kernels as kernels;
#[doc(inline)]
pub use blob_layers as layers;
#[doc(inline)]
pub use blob_proto as proto;
#[doc(inline)]
pub use blob_runtime as runtime;

pub use blob_runtime::{
    Blob, BlobError, CaffeModel, DeviceBackend, DeviceError, Element, Head, HostBuffer,
    MathElement, ShapeError, SyncedMemory, check_host_room, host_memory_in_use, host_memory_limit,
    set_host_memory_limit,
};
#[cfg(feature = "safetensors")]
pub use blob_runtime::{TensorFile, TensorInfo, TensorNames, write_tensors};

/// The names most programs need: `use blobflow::prelude::*;`.
pub mod prelude {
    pub use crate::blob;
    pub use crate::typed::{D, Dim, Dyn, TypedBlob};
    pub use blob_kernels::Real;
    pub use blob_runtime::{
        Blob, BlobError, CaffeModel, Element, Head, HostBuffer, MathElement, SyncedMemory,
    };
}
