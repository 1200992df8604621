//! Caffe's data layers for blobflow: what `caffe train` reads.
//!
//! - [`data_layer`] (`type: "Data"`): batches of `Datum` records from an
//!   LMDB or LevelDB store (what Caffe's `convert_imageset` and `convert_mnist_data`
//!   write), raw or encoded JPEG/PNG;
//! - [`image_data_layer`] (`type: "ImageData"`): images named by a list
//!   file, resized as OpenCV resizes them ([`resize_linear`]);
//! - [`annotated_data_layer`] (`type: "AnnotatedData"`, the SSD fork's,
//!   with the YOLO fork's label layout and scales): annotated records
//!   distorted, expanded, sampled or jittered, resized by `resize_param`
//!   (warped or with their aspect kept, by OpenCV's LINEAR, AREA,
//!   NEAREST or LANCZOS4: [`resize_area`], [`resize_lanczos4`]) and
//!   mirrored, their boxes following;
//! - [`lane_data_layer`] (`type: "LaneData"`, the YOLO fork's): TuSimple
//!   lane records through AnnotatedData's steps, the lanes as points
//!   and drawn one pixel wide;
//! - [`dense_image_data_layer`] (`type: "DenseImageData"`, SegNet's
//!   fork): images and their label images named in pairs by a list
//!   file, mirrored and cropped alike, for nets that label each pixel;
//! - [`window_data_layer`] (`type: "WindowData"`): R-CNN's windows of
//!   images, cut out with context, warped and sampled foreground and
//!   background;
//! - each as a [`PrefetchingDataLayer`]: a thread reads and transforms
//!   batches ahead of the net.
//! - [`MemoryDataLayer`] (`type: "MemoryData"`): batches from arrays or
//!   records the program hands it (`reset`, `add_datum_vector`) through
//!   `Net::layer_mut`.
//! - `Hdf5DataLayer` and `Hdf5OutputLayer` (`HDF5Data`, `HDF5Output`;
//!   feature `hdf5`, through the system's HDF5 library): rows of the
//!   datasets named by the tops from the files a list names, and a net's
//!   blobs written as `data` and `label`.
//! - [`DataTransformer`] (`transform_param`): crop, mirror, mean file or
//!   values, scale, `force_color` / `force_gray`, in Caffe's order and
//!   arithmetic.
//! - [`StoreReader`], [`StoreWriter`]: LMDB and LevelDB stores, read
//!   and written as Caffe's `db::LMDB` and `db::LevelDB` do;
//! - Caffe's dataset tools: [`convert_imageset`], [`compute_image_mean`],
//!   and the SSD fork's [`convert_annoset`] (and the YOLO fork's lanes) and `get_image_size`
//!   ([`image_sizes`]).
//!
//! A net reads its stores when it is built with [`data_registry`] (or a
//! registry [`register_data_layers`] added them to); without them, a
//! data layer's tops are inputs its caller fills.
//!
//! ```no_run
//! use blob_layers::net::{Net, NetState};
//! let net = Net::<f32>::builder()
//!     .state(NetState::train())
//!     .registry(&blob_data::data_registry())
//!     .from_file("examples/mnist/lenet_train_test.prototxt")?;
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod annoset;
mod annotated_data;
mod data_layer;
mod datum;
mod dense_image_data;
mod distort;
#[cfg(feature = "hdf5")]
mod hdf5;
mod image_data;
mod imageset;
mod lane_data;
mod leveldb;
mod list;
mod memory_data;
mod name_size;
mod order;
mod prefetch;
mod resize;
mod resize_policy;
mod segmentation_labels;
mod store;
mod transform;
mod window_data;
mod yolo_labels;

pub use annoset::{AnnotationKind, convert_annoset, read_label_map};
pub use annotated_data::annotated_data_layer;
pub use data_layer::data_layer;
pub use datum::{ColorMode, Example, Pixels, decode_datum};
pub use dense_image_data::dense_image_data_layer;
#[cfg(feature = "hdf5")]
pub use hdf5::{Hdf5DataLayer, Hdf5OutputLayer};
pub use image_data::image_data_layer;
pub use imageset::{
    ImageSetEvent, ImageSetOptions, ToolError, compute_image_mean, convert_imageset,
};
pub use lane_data::lane_data_layer;
pub use memory_data::MemoryDataLayer;
pub use name_size::image_sizes;
pub use prefetch::{PrefetchingDataLayer, set_decoding_threads};
pub use resize::{resize_area, resize_cubic, resize_lanczos4, resize_linear};
pub use store::{Backend, StoreError, StoreReader, StoreWriter};
pub use transform::DataTransformer;
pub use window_data::window_data_layer;

use blob_layers::registry::LayerRegistry;
use blob_runtime::MathElement;

/// Adds the data layers that read stores and files (`Data`,
/// `ImageData`, `WindowData`, SegNet's `DenseImageData`...) to
/// `registry`, replacing the caller-filled inputs those types are
/// otherwise; an error where a field the registry already holds clashes
/// with `dense_image_data_param` (number 10138).
///
/// ```
/// let mut registry = blob_layers::registry::LayerRegistry::<f32>::with_caffe_layers();
/// blob_data::register_data_layers(&mut registry)?;
/// assert!(registry.knows("Data"));
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn register_data_layers<T: MathElement>(
    registry: &mut LayerRegistry<T>,
) -> Result<(), blob_runtime::BlobError> {
    registry.register("Data", |p| Ok(Box::new(data_layer::<T>(p)?)));
    registry.register("AnnotatedData", |p| {
        Ok(Box::new(annotated_data_layer::<T>(p)?))
    });
    registry.register("LaneData", |p| Ok(Box::new(lane_data_layer::<T>(p)?)));
    registry.register("ImageData", |p| Ok(Box::new(image_data_layer::<T>(p)?)));
    registry.register_with_param(
        "DenseImageData",
        dense_image_data::DENSE_IMAGE_DATA_FIELD,
        |p| Ok(Box::new(dense_image_data_layer::<T>(p)?)),
    )?;
    registry.register("WindowData", |p| Ok(Box::new(window_data_layer::<T>(p)?)));
    registry.register("MemoryData", |p| {
        Ok(Box::new(MemoryDataLayer::<T>::from_param(p)?))
    });
    #[cfg(feature = "hdf5")]
    {
        registry.register("HDF5Data", |p| Ok(Box::new(Hdf5DataLayer::from_param(p)?)));
        registry.register("HDF5Output", |p| {
            Ok(Box::new(Hdf5OutputLayer::from_param(p)?))
        });
    }
    #[cfg(not(feature = "hdf5"))]
    for kind in ["HDF5Data", "HDF5Output"] {
        registry.register(kind, move |_| {
            Err(blob_runtime::BlobError::InvalidParameter {
                op: "set up an HDF5 layer",
                detail: format!(
                    "{kind} reads and writes HDF5 files through the HDF5 library: build with the \
                     `hdf5` feature (blob-data's, or blobflow-cli's) and Debian's libhdf5-dev"
                ),
            })
        });
    }
    Ok(())
}

/// Caffe's layers with the data layers that read stores: what
/// `blobflow train` and `blobflow test` build nets with.
///
/// ```
/// assert!(blob_data::data_registry::<f32>().knows("Convolution"));
/// ```
pub fn data_registry<T: MathElement>() -> LayerRegistry<T> {
    let mut registry = LayerRegistry::with_caffe_layers();
    register_data_layers(&mut registry)
        .expect("Caffe's and the forks' fields leave dense_image_data_param's number free");
    registry
}
