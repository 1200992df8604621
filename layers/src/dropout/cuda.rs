//! The CUDA side of Dropout: the mask drawn by cuRAND on the device, kept
//! for the backward pass.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{CudaError, Gpu, Scratch, launch_config};
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
    /// `y = x * keep[i / plane] * scale`: ENet's spatial dropout.
    pub(crate) fn spatial_dropout_f32(n: i64, plane: i64, keep: &CudaView<'_, u32>, scale: f32, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>);
    /// `y *= keep[i / plane] * scale`.
    pub(crate) fn spatial_dropout_inplace_f32(n: i64, plane: i64, keep: &CudaView<'_, u32>, scale: f32, y: &mut CudaViewMut<'_, f32>);
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

/// ENet's spatial dropout: `to = from * keep * scale`, one of `keep`'s
/// values (drawn on the host) for each map of `to`, on data (forward) or
/// diffs (backward).
pub(crate) fn spatial(
    gpu: &Gpu,
    keep: &[u32],
    scale: f32,
    from: &Blob<f32>,
    to: &Blob<f32>,
    diffs: bool,
) -> Result<()> {
    const OP: &str = "spatial dropout on the GPU";
    let n = to.count();
    if n == 0 {
        return Ok(());
    }
    let plane = (n / keep.len().max(1)) as i64;
    let keep = gpu
        .stream()
        .clone_htod(keep)
        .map_err(|e| cuda(OP, CudaError::driver("upload the maps' draws")(e)))?;
    let (config, keep) = (launch_config(n), keep.as_view());
    each_way(OP, from, to, diffs, |src, dst| match src {
        // SAFETY: the buffer holds n values, keep one a map of `plane`.
        None => unsafe {
            spatial_dropout_inplace_f32(gpu, config, n as i64, plane, &keep, scale, dst)
        },
        // SAFETY: both buffers hold n values, keep one a map of `plane`.
        Some(src) => unsafe {
            spatial_dropout_f32(gpu, config, n as i64, plane, &keep, scale, src, dst)
        },
    })
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
    each_way(OP, from, to, diffs, |src, dst| match src {
        // SAFETY: the mask and the buffer hold n values.
        None => unsafe { dropout_inplace_f32(gpu, config, n as i64, mask, scale, dst) },
        // SAFETY: the mask and both buffers hold n values.
        Some(src) => unsafe { dropout_f32(gpu, config, n as i64, mask, scale, src, dst) },
    })
}

/// Runs `launch` on `to`'s device data (or diffs), with `from`'s as its
/// source, or none where the two are one blob (in place).
fn each_way(
    op: &'static str,
    from: &Blob<f32>,
    to: &Blob<f32>,
    diffs: bool,
    launch: impl FnOnce(
        Option<&CudaView<'_, f32>>,
        &mut CudaViewMut<'_, f32>,
    ) -> std::result::Result<(), CudaError>,
) -> Result<()> {
    let n = to.count();
    let mut dst = if diffs {
        to.mutable_gpu_diff()?
    } else {
        to.mutable_gpu_data()?
    };
    if in_place(from, to) {
        return launch(None, &mut write(&mut dst, n)?).map_err(|e| cuda(op, e));
    }
    let src = if diffs {
        from.gpu_diff()?
    } else {
        from.gpu_data()?
    };
    launch(Some(&read(&src, n)?), &mut write(&mut dst, n)?).map_err(|e| cuda(op, e))
}
