//! A convolution's passes on the device its blobs live on, with the
//! buffers they keep between calls: what the typed [`Convolution`](super::Convolution)
//! and the run-time [`ConvolutionLayer`](super::ConvolutionLayer) both run.

use blob_runtime::{Blob, MathElement};

use super::cpu::{self, ConvGeometry, ConvGradients, ConvScratch};
#[cfg(feature = "cuda")]
use super::cuda;
#[cfg(feature = "cudnn")]
use super::cudnn;
use crate::layer::Result;

/// Whether the GPU side may take cuDNN, and with TF32 (feature `cudnn`;
/// empty otherwise).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CudnnChoice {
    #[cfg(feature = "cudnn")]
    pub use_cudnn: bool,
    #[cfg(feature = "cudnn")]
    pub allow_tf32: bool,
}

/// The buffers a convolution keeps between passes (grow-only).
#[derive(Default)]
pub(crate) struct ConvEngine<T: MathElement> {
    scratch: ConvScratch<T>,
    #[cfg(feature = "cuda")]
    gpu_scratch: cuda::GpuScratch,
    #[cfg(feature = "cudnn")]
    cudnn: Option<cudnn::CudnnConv>,
}

impl<T: MathElement> ConvEngine<T> {
    /// `y = conv(x) + bias` (Caffe `Forward_cpu`, or `Forward_gpu` when
    /// `x` lives on a CUDA device).
    #[cfg_attr(not(feature = "cudnn"), allow(unused_variables))]
    pub fn forward(
        &mut self,
        g: &ConvGeometry,
        choice: CudnnChoice,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for_learned("convolve", x, y, weight, bias)? {
            let blobs = cuda::ConvBlobs::of(x, weight, bias, y);
            #[cfg(feature = "cudnn")]
            if let Some(dnn) = cudnn::CudnnConv::for_layer(&mut self.cudnn, choice.use_cudnn, &gpu)?
            {
                return dnn.forward(&gpu, g, choice.allow_tf32, blobs);
            }
            return cuda::forward(g, &mut self.gpu_scratch, &gpu, blobs);
        }
        cpu::forward(
            g,
            &mut self.scratch,
            &x.cpu_data()?,
            &weight.cpu_data()?,
            &bias.cpu_data()?,
            &mut y.mutable_cpu_data()?,
        );
        Ok(())
    }

    /// Weight and bias gradients from `y`'s diff (accumulated), and `x`'s
    /// diff when `propagate_down` (Caffe `Backward_cpu`).
    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(not(feature = "cudnn"), allow(unused_variables))]
    pub fn backward(
        &mut self,
        g: &ConvGeometry,
        choice: CudnnChoice,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: &Blob<T>,
        y: &Blob<T>,
        propagate_down: bool,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for_learned("convolve", x, y, weight, bias)? {
            let blobs = cuda::ConvBlobs::of(x, weight, bias, y);
            #[cfg(feature = "cudnn")]
            if let Some(dnn) = cudnn::CudnnConv::for_layer(&mut self.cudnn, choice.use_cudnn, &gpu)?
            {
                return dnn.backward(&gpu, g, choice.allow_tf32, blobs, propagate_down);
            }
            return cuda::backward(g, &mut self.gpu_scratch, &gpu, blobs, propagate_down);
        }
        let mut dx = if propagate_down {
            Some(x.mutable_cpu_diff()?)
        } else {
            None
        };
        cpu::backward(
            g,
            &mut self.scratch,
            &x.cpu_data()?,
            &weight.cpu_data()?,
            &y.cpu_diff()?,
            ConvGradients {
                weight: &mut weight.mutable_cpu_diff()?,
                bias: &mut bias.mutable_cpu_diff()?,
                input: dx.as_deref_mut(),
            },
        );
        Ok(())
    }
}
