//! The CUDA side of LRN, across channels and within a channel: one
//! thread per value, each summing its window.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, Scratch, launch_config};
use blob_runtime::Blob;

use super::Lrn;
use crate::gpu::{cuda, int, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `lrn.cu`: LRN, `f32`.
    pub(crate) static LRN = "lrn.cu";
    /// The scale and `y = x scale^-beta`.
    pub(crate) fn lrn_forward_f32(
        total: i64, channels: i32, plane: i64, size: i32, alpha: f32, beta: f32, k: f32,
        x: &CudaView<'_, f32>, scale: &mut CudaViewMut<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// The input's gradient.
    pub(crate) fn lrn_backward_f32(
        total: i64, channels: i32, plane: i64, size: i32, alpha: f32, beta: f32,
        x: &CudaView<'_, f32>, y: &CudaView<'_, f32>, scale: &CudaView<'_, f32>,
        dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
    /// Within a channel: the scale and `y = x scale^-beta`.
    pub(crate) fn lrn_within_forward_f32(
        total: i64, height: i64, width: i64, size: i32, alpha: f32, beta: f32,
        x: &CudaView<'_, f32>, scale: &mut CudaViewMut<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// Within a channel: the input's gradient.
    pub(crate) fn lrn_within_backward_f32(
        total: i64, height: i64, width: i64, size: i32, alpha: f32, beta: f32,
        x: &CudaView<'_, f32>, y: &CudaView<'_, f32>, scale: &CudaView<'_, f32>,
        dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "LRN on the GPU";

/// `y` from `x` (never the same blob) of `(N, C, H, W)`, the scale kept
/// for backward.
pub(crate) fn forward(
    gpu: &Gpu,
    lrn: &Lrn,
    [_, channels, height, width]: [usize; 4],
    scale: &mut Scratch<f32>,
    x: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let total = x.count();
    let mut s = scale.grown(gpu, total).map_err(|e| cuda(OP, e))?;
    let (xg, mut yg) = (x.gpu_data()?, y.mutable_gpu_data()?);
    if lrn.within_channel {
        // SAFETY: x, scale and y hold total values.
        return unsafe {
            lrn_within_forward_f32(
                gpu,
                launch_config(total),
                total as i64,
                height as i64,
                width as i64,
                int(OP, lrn.size)?,
                lrn.alpha as f32,
                lrn.beta as f32,
                &read(&xg, total)?,
                &mut s,
                &mut write(&mut yg, total)?,
            )
        }
        .map_err(|e| cuda(OP, e));
    }
    let plane = height * width;
    // SAFETY: x, scale and y hold total values.
    unsafe {
        lrn_forward_f32(
            gpu,
            launch_config(total),
            total as i64,
            int(OP, channels)?,
            plane as i64,
            int(OP, lrn.size)?,
            lrn.alpha as f32,
            lrn.beta as f32,
            lrn.k as f32,
            &read(&xg, total)?,
            &mut s,
            &mut write(&mut yg, total)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// `x`'s gradient from `y`'s, with the forward pass's scale.
pub(crate) fn backward(
    gpu: &Gpu,
    lrn: &Lrn,
    [_, channels, height, width]: [usize; 4],
    scale: &mut Scratch<f32>,
    x: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let total = x.count();
    let s = scale.grown(gpu, total).map_err(|e| cuda(OP, e))?;
    let (xg, yg, dyg) = (x.gpu_data()?, y.gpu_data()?, y.gpu_diff()?);
    let mut dxg = x.mutable_gpu_diff()?;
    if lrn.within_channel {
        // SAFETY: every buffer holds total values.
        return unsafe {
            lrn_within_backward_f32(
                gpu,
                launch_config(total),
                total as i64,
                height as i64,
                width as i64,
                int(OP, lrn.size)?,
                lrn.alpha as f32,
                lrn.beta as f32,
                &read(&xg, total)?,
                &read(&yg, total)?,
                &s.as_view(),
                &read(&dyg, total)?,
                &mut write(&mut dxg, total)?,
            )
        }
        .map_err(|e| cuda(OP, e));
    }
    let plane = height * width;
    // SAFETY: every buffer holds total values.
    unsafe {
        lrn_backward_f32(
            gpu,
            launch_config(total),
            total as i64,
            int(OP, channels)?,
            plane as i64,
            int(OP, lrn.size)?,
            lrn.alpha as f32,
            lrn.beta as f32,
            &read(&xg, total)?,
            &read(&yg, total)?,
            &s.as_view(),
            &read(&dyg, total)?,
            &mut write(&mut dxg, total)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}
