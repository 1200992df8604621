//! A [`Net`] written as an ONNX model (opset 13), for every framework
//! that reads ONNX: onnxruntime, OpenVINO, TensorRT, tract, candle-onnx,
//! burn-import.
//!
//! Each Caffe layer becomes the ONNX operators that compute what Caffe
//! computes, its learned blobs initializers (`LAYER.weight`,
//! `LAYER.bias`, ...): Convolution and Deconvolution (groups, dilation),
//! Pooling with Caffe's rounding up (as extra padding at the end, so every
//! reader agrees; AVE over padding as Caffe counts it), InnerProduct,
//! LRN across and within channels, BatchNorm and Scale, PReLU, the
//! activations, Softmax, Concat, Eltwise, Flatten, Reshape, Permute,
//! Crop, SSD's Normalize, and PriorBox as the constant it is. Dropout and
//! Caffe's automatic Splits vanish. The first axis of the inputs is a
//! dynamic batch (`N`). A layer ONNX cannot express (DetectionOutput, a
//! Python layer, a layer of your own) is refused with its name, unless
//! the export stops before it ([`OnnxExport::outputs`]).
//!
//! Blob names stay: the graph's inputs and outputs are the net's, and a
//! blob written in place by several layers is the net's blob after its
//! last writer (earlier values are `BLOB#k`).
//!
//! ```
//! use blob_layers::net::{Net, NetState};
//! use blob_layers::onnx::OnnxExport;
//! let mut net = Net::<f32>::from_prototxt(
//!     r#"input: "data" input_shape { dim: 1 dim: 1 dim: 8 dim: 8 }
//!        layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
//!                convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
//!        layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
//!        layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
//!                pooling_param { pool: MAX kernel_size: 3 stride: 2 } }"#,
//!     NetState::test(),
//! )?;
//! let bytes = OnnxExport::new().to_bytes(&mut net)?;
//! assert!(bytes.len() > 4 * 4 * 9);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

mod export;
mod proto;

use std::path::Path;

use blob_runtime::{BlobError, Result};

use crate::net::Net;

/// How a [`Net`] is written as ONNX (Caffe has no such tool; this is the
/// converter its users reach for in `caffe2onnx`, which no longer
/// installs). `blobflow convert NET.prototxt WEIGHTS.caffemodel OUT.onnx`
/// runs it from the command line.
#[derive(Clone, Debug, Default)]
pub struct OnnxExport {
    outputs: Option<Vec<String>>,
}

impl OnnxExport {
    /// The whole net, its outputs the net's (the blobs no layer reads).
    ///
    /// ```
    /// let export = blob_layers::onnx::OnnxExport::new();
    /// # let _ = export;
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Only what these blobs need, and these blobs as the graph's outputs
    /// (SSD's `mbox_loc`, `mbox_conf_flatten` and `mbox_priorbox`, say,
    /// leaving out the DetectionOutput that reads them).
    ///
    /// ```
    /// let export = blob_layers::onnx::OnnxExport::new().outputs(["mbox_loc", "mbox_priorbox"]);
    /// # let _ = export;
    /// ```
    pub fn outputs<S: Into<String>>(mut self, blobs: impl IntoIterator<Item = S>) -> Self {
        self.outputs = Some(blobs.into_iter().map(Into::into).collect());
        self
    }

    /// The model's bytes. Runs the net forward once first (PriorBox's
    /// values are taken from its output); its inputs' values do not
    /// matter.
    ///
    /// # Errors
    /// A layer ONNX cannot express, named with its type; an output that
    /// is no blob of the net; a failed forward pass.
    pub fn to_bytes(&self, net: &mut Net<f32>) -> Result<Vec<u8>> {
        export::model(net, self.outputs.as_deref())
    }

    /// [`to_bytes`](Self::to_bytes) written to `path`, complete or not at
    /// all (a temporary file renamed into place).
    ///
    /// # Errors
    /// As [`to_bytes`](Self::to_bytes), and the file's I/O errors.
    pub fn save(&self, net: &mut Net<f32>, path: impl AsRef<Path>) -> Result<()> {
        let bytes = self.to_bytes(net)?;
        blob_runtime::write_atomically(path, &bytes)
    }
}

/// An export error naming what could not be written.
fn refused(detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "ONNX export",
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests;
