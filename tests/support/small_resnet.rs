//! A small residual net for the training tests: convolutions without
//! bias, BatchNorm with its moving averages, Scale with bias, Eltwise
//! sums, on 28 x 28 digits.

// Each test file that includes this module uses a part of it.
#![allow(dead_code)]

use blobflow::BlobError;
use blobflow::layers::net::{Net, NetState};

/// conv -> BN -> Scale -> ReLU, then a residual block of two such
/// convolutions summed with its input, then a downsampling block with a
/// projection shortcut, global average pooling and the classifier.
pub const RESNET: &str = r#"name: "small-resnet"
layer { name: "data" type: "Data" top: "data" top: "label" }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 stride: 2 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "res2a" type: "Convolution" bottom: "conv1" top: "res2a"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn2a" type: "BatchNorm" bottom: "res2a" top: "res2a"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale2a" type: "Scale" bottom: "res2a" top: "res2a" scale_param { bias_term: true } }
layer { name: "relu2a" type: "ReLU" bottom: "res2a" top: "res2a" }
layer { name: "res2b" type: "Convolution" bottom: "res2a" top: "res2b"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn2b" type: "BatchNorm" bottom: "res2b" top: "res2b"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale2b" type: "Scale" bottom: "res2b" top: "res2b" scale_param { bias_term: true } }
layer { name: "res2" type: "Eltwise" bottom: "conv1" bottom: "res2b" top: "res2" }
layer { name: "relu2" type: "ReLU" bottom: "res2" top: "res2" }
layer { name: "res3a" type: "Convolution" bottom: "res2" top: "res3a"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 stride: 2 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn3a" type: "BatchNorm" bottom: "res3a" top: "res3a"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale3a" type: "Scale" bottom: "res3a" top: "res3a" scale_param { bias_term: true } }
layer { name: "relu3a" type: "ReLU" bottom: "res3a" top: "res3a" }
layer { name: "res3b" type: "Convolution" bottom: "res3a" top: "res3b"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn3b" type: "BatchNorm" bottom: "res3b" top: "res3b"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale3b" type: "Scale" bottom: "res3b" top: "res3b" scale_param { bias_term: true } }
layer { name: "proj3" type: "Convolution" bottom: "res2" top: "proj3"
  convolution_param { num_output: 16 kernel_size: 1 stride: 2 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn3p" type: "BatchNorm" bottom: "proj3" top: "proj3"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale3p" type: "Scale" bottom: "proj3" top: "proj3" scale_param { bias_term: true } }
layer { name: "res3" type: "Eltwise" bottom: "proj3" bottom: "res3b" top: "res3" }
layer { name: "relu3" type: "ReLU" bottom: "res3" top: "res3" }
layer { name: "pool" type: "Pooling" bottom: "res3" top: "pool" pooling_param { pool: AVE global_pooling: true } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "fc" bottom: "label" top: "accuracy" include { phase: TEST } }
"#;

/// The net for `state` with `batch` digits, its fillers drawing from
/// the CPU's generator.
pub fn resnet(state: NetState, batch: usize) -> Result<Net<f32>, BlobError> {
    Net::<f32>::builder()
        .state(state)
        .input_shape("data", &[batch, 1, 28, 28])
        .input_shape("label", &[batch])
        .from_prototxt(RESNET)
}
