//! Caffe's layers, `Net` and solvers, with typed nets over them: a net
//! declared in Rust whose every layer reads the output of the layer before
//! it (or of a named branch), its shapes computed at compile time, so a
//! mis-wired net does not compile.
//!
//! - [`typed_net`]: nets declared by construction ([`typed_net::NetSpec`]),
//!   built into the same [`net::Net`] a `.prototxt` builds.
//! - [`net::Net`]: Caffe's `Net`, built at run time from a `.prototxt`
//!   over the run-time layers ([`DynLayer`]) of a
//!   [`registry::LayerRegistry`], to which you can add your own types.
//! - [`shapes`]: the output shapes, as type-level functions of the input.
//! - [`filler`] (Caffe's fillers); [`solver`] (Caffe's six solver
//!   types with its arithmetic, learning-rate policies, `.solverstate`
//!   snapshots, solver prototxt files and Caffe's training loop);
//!   [`check`] (Caffe's gradient checker, for your own layers).
//!
//! Depend on `blobflow` (which re-exports this crate as `blobflow::layers`)
//! unless you want the layers without the facade.
//!
//! A net from Caffe's text format, trained one step:
//!
//! ```
//! use blob_layers::net::{Net, NetState};
//! let mut net = Net::<f32>::from_prototxt(
//!     r#"input: "data" input_shape { dim: 4 dim: 1 dim: 8 dim: 8 }
//!        input: "label" input_shape { dim: 4 }
//!        layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
//!                convolution_param { num_output: 3 kernel_size: 3 weight_filler { type: "xavier" } } }
//!        layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
//!        layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
//!                inner_product_param { num_output: 2 weight_filler { type: "xavier" } } }
//!        layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }"#,
//!     NetState::train(),
//! )?;
//! net.blob("data").unwrap().mutable_cpu_data()?.fill(0.5);
//! net.blob("label").unwrap().mutable_cpu_data()?.copy_from_slice(&[0.0, 1.0, 1.0, 0.0]);
//! let mut solver = blob_layers::solver::SgdSolver::lenet();
//! net.clear_param_diffs()?;
//! let loss = net.forward()?;
//! net.backward()?;
//! solver.step(&net.param_blobs(), &net.param_specs())?;
//! assert!(loss > 0.0);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod activation;
mod argmax;
mod axpy;
mod batch_norm;
mod batch_reindex;
mod bn;
mod channel_affine;
pub mod check;
mod concat;
mod conv;
mod crop;
mod deconv;
mod detection_evaluate;
mod detection_output;
mod dropout;
mod dummy_data;
mod dyn_layer;
mod eltwise;
mod embed;
mod f32_view;
pub mod filler;
mod filter;
mod flatten;
mod folded_activation;
mod fork_layers;
#[cfg(feature = "cuda")]
mod gpu;
mod im2col;
mod image_sizes;
mod inner_product;
mod input;
mod interp;
mod layer;
mod loss;
mod lrn;
mod multibox_loss;
mod mvn;
pub mod net;
mod net_layers;
mod neuron;
mod normalize;
mod normalized_box;
pub mod onnx;
mod parameter;
mod per_element;
mod permute;
mod planes;
mod pool;
mod prelu;
mod prior_box;
mod proposal;
mod psroi_pooling;
mod recurrent;
mod reduction;
pub mod registry;
mod reorg;
mod reshape;
mod roi_pooling;
mod scale;
pub mod shapes;
mod shuffle_channel;
mod silence;
mod slice;
mod softmax;
pub mod solver;
mod split;
mod spp;
mod tile;
pub mod typed_layer;
pub mod typed_net;
mod upsample;
mod yolo;

/// The CUDA sources of the layers, for the checks that hold each launcher
/// against the PTX NVRTC compiles (feature `cuda`).
///
/// ```
/// assert!(blob_layers::KERNEL_SOURCES.iter().any(|s| s.file == "conv.cu"));
/// ```
#[cfg(feature = "cuda")]
pub static KERNEL_SOURCES: [&blob_kernels::cuda::KernelSource; 31] = [
    &conv::CONV,
    &pool::POOL,
    &activation::ACTIVATION,
    &inner_product::INNER_PRODUCT,
    &softmax::SOFTMAX,
    &dropout::DROPOUT,
    &prelu::PRELU,
    &lrn::LRN,
    &eltwise::ELTWISE,
    &concat::CONCAT,
    &scale::SCALE,
    &batch_norm::BATCH_NORM,
    &solver::SOLVER,
    &permute::PERMUTE,
    &neuron::NEURON,
    &normalize::NORMALIZE,
    &argmax::ARGMAX,
    &shuffle_channel::SHUFFLE_CHANNEL,
    &upsample::UPSAMPLE,
    &axpy::AXPY,
    &bn::BN,
    &interp::INTERP,
    &loss::cuda::LOSS,
    &reorg::REORG,
    &tile::TILE,
    &reduction::REDUCTION,
    &mvn::MVN,
    &embed::EMBED,
    &batch_reindex::BATCH_REINDEX,
    &recurrent::LSTM_UNIT,
    &recurrent::RECURRENT,
];

pub use channel_affine::ChannelAffine;
#[cfg(feature = "cuda")]
pub use conv::gpu_convolution_path;
pub use dyn_layer::{Arity, ChannelBlocks, DynLayer, Sharing, Shortcut, TopShape};
pub use folded_activation::Activation;
pub use fork_layers::Fork;
pub use pool::PoolMethod;
pub use yolo::YOLO_LABEL_ROWS;
