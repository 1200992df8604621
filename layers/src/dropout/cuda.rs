//! The CUDA side of Dropout: the mask drawn by cuRAND on the device, kept
//! for the backward pass.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, Scratch, launch_config};
use blob_runtime::Blob;

use crate::gpu::{cuda, read, write};
use crate::layer::{Result, in_place};

blob_kernels::cuda_kernels! {
    /// `dropout.cu`: Dropout, `f32`.
    pub(crate) static DROPOUT = "dropout.cu";
    /// `y = x * keep * scale`.
    pub(crate) fn dropout_f32(n: i64, keep: &CudaView<'_, u32>, scale: f32, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>);
    /// `y *= keep * scale`.
    pub(crate) fn dropout_inplace_f32(n: i64, keep: &CudaView<'_, u32>, scale: f32, y: &mut CudaViewMut<'_, f32>);
}

const OP: &str = "dropout on the GPU";

/// Draws a new mask (each kept with probability `keep`) and applies it.
pub(crate) fn forward(
    gpu: &Gpu,
    mask: &mut Scratch<u32>,
    keep: f32,
    scale: f32,
    x: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let n = y.count();
    let mut mask = mask.grown(gpu, n).map_err(|e| cuda(OP, e))?;
    gpu.bernoulli(keep, &mut mask).map_err(|e| cuda(OP, e))?;
    apply(gpu, &mask.as_view(), scale, x, y, false)
}

/// The mask and scale of the forward pass on the gradient.
pub(crate) fn backward(
    gpu: &Gpu,
    mask: &Scratch<u32>,
    scale: f32,
    x: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let n = x.count();
    let mask = mask.view(n).ok_or(blob_runtime::BlobError::CountMismatch {
        op: "dropout backward on the GPU",
        what: "the forward pass's mask".into(),
        got: mask.len(),
        want: n,
    })?;
    apply(gpu, &mask, scale, y, x, true)
}

/// `to = from * mask * scale`, on data (forward) or diffs (backward).
fn apply(
    gpu: &Gpu,
    mask: &CudaView<'_, u32>,
    scale: f32,
    from: &Blob<f32>,
    to: &Blob<f32>,
    diffs: bool,
) -> Result<()> {
    let n = to.count();
    let config = launch_config(n);
    if in_place(from, to) {
        let mut g = if diffs {
            to.mutable_gpu_diff()?
        } else {
            to.mutable_gpu_data()?
        };
        // SAFETY: the mask and the buffer hold n values.
        return unsafe {
            dropout_inplace_f32(gpu, config, n as i64, mask, scale, &mut write(&mut g, n)?)
        }
        .map_err(|e| cuda(OP, e));
    }
    let src = if diffs {
        from.gpu_diff()?
    } else {
        from.gpu_data()?
    };
    let mut dst = if diffs {
        to.mutable_gpu_diff()?
    } else {
        to.mutable_gpu_data()?
    };
    // SAFETY: the mask, source and destination hold n values.
    unsafe {
        dropout_f32(
            gpu,
            config,
            n as i64,
            mask,
            scale,
            &read(&src, n)?,
            &mut write(&mut dst, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}
