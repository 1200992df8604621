//! Caffe's Convolution layer: its run-time layer (`runtime`), the engines
//! it convolves with (im2col + gemm, Winograd, depthwise, N-D volumes on
//! the CPU; cuBLAS, cuDNN and kernels of its own on a GPU) and their
//! geometry.

mod channel_blocks;
mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "cudnn")]
mod cudnn;
mod deconv_pointwise;
mod depthwise;
mod depthwise_gradient;
mod direct;
mod engine;
mod packed_weights;
mod phase_copies;
mod runtime;
#[cfg(test)]
mod test_support;
mod volume;
mod winograd;

pub(crate) use cpu::{ConvGeometry, ConvGradients};
#[cfg(feature = "cuda")]
pub(crate) use cuda::CONV;
#[cfg(feature = "cuda")]
pub(crate) use cuda::im2col_images;
pub(crate) use engine::ConvEngine;
pub(crate) use runtime::{ConvParam, ConvolutionLayer, Plan, planar_size};
pub(crate) use volume::VolumeGeometry;

/// How a `Convolution` layer convolves on a GPU in this build on this
/// machine, in words: `"cuDNN 9.21.0"`, or `"im2col + cuBLAS"` and why
/// cuDNN is not used (a layer with `engine: CAFFE` takes im2col too).
///
/// ```
/// let path = blob_layers::gpu_convolution_path();
/// assert!(path.starts_with("cuDNN") || path.starts_with("im2col + cuBLAS ("));
/// ```
#[cfg(feature = "cuda")]
pub fn gpu_convolution_path() -> String {
    match blob_kernels::cuda::cudnn() {
        Ok(version) => format!("cuDNN {version}"),
        Err(why) => format!("im2col + cuBLAS ({why})"),
    }
}
