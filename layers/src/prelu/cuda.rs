//! The CUDA side of PReLU: element-wise passes, and one thread per
//! channel summing its slope's gradient.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};
use blob_runtime::Blob;

use crate::gpu::{cuda, int, read, write};
use crate::layer::{Result, in_place};

blob_kernels::cuda_kernels! {
    /// `prelu.cu`: PReLU, `f32`.
    pub(crate) static PRELU = "prelu.cu";
    /// `y = x > 0 ? x : slope * x`.
    pub(crate) fn prelu_forward_f32(
        n: i64, channels: i32, dim: i64, x: &CudaView<'_, f32>, slope: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>
    );
    /// `dx = dy * (x > 0 ? 1 : slope)`.
    pub(crate) fn prelu_backward_f32(
        n: i64, channels: i32, dim: i64, x: &CudaView<'_, f32>, slope: &CudaView<'_, f32>,
        dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
    /// `d *= x > 0 ? 1 : slope`, in place.
    pub(crate) fn prelu_backward_inplace_f32(
        n: i64, channels: i32, dim: i64, x: &CudaView<'_, f32>, slope: &CudaView<'_, f32>,
        d: &mut CudaViewMut<'_, f32>
    );
    /// `dslope += sum(dy * x [x <= 0])` per channel.
    pub(crate) fn prelu_slope_diff_f32(
        channels: i32, n: i64, dim: i64, x: &CudaView<'_, f32>, dy: &CudaView<'_, f32>,
        dslope: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "PReLU on the GPU";

/// `y` from `input`, which is never `y` itself (the layer keeps a copy of
/// an in-place input).
pub(crate) fn forward(
    gpu: &Gpu,
    (channels, dim): (usize, usize),
    input: &Blob<f32>,
    slope: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let n = y.count();
    let (ig, sg, mut yg) = (input.gpu_data()?, slope.gpu_data()?, y.mutable_gpu_data()?);
    // SAFETY: input and y hold n values, slope `channels`.
    unsafe {
        prelu_forward_f32(
            gpu,
            launch_config(n),
            n as i64,
            int(OP, channels)?,
            dim as i64,
            &read(&ig, n)?,
            &read(&sg, channels)?,
            &mut write(&mut yg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// The slope's gradient (accumulated) and, when `propagate_down`, `x`'s
/// diff, from `input` (`x` as the forward pass read it) and `y`'s diff.
pub(crate) fn backward(
    gpu: &Gpu,
    (channels, dim): (usize, usize),
    input: &Blob<f32>,
    slope: &Blob<f32>,
    (y, x): (&Blob<f32>, &Blob<f32>),
    propagate_down: bool,
) -> Result<()> {
    let n = y.count();
    let c = int(OP, channels)?;
    {
        let (ig, dyg, mut dsg) = (input.gpu_data()?, y.gpu_diff()?, slope.mutable_gpu_diff()?);
        // SAFETY: input and dy hold n values, dslope `channels`.
        unsafe {
            prelu_slope_diff_f32(
                gpu,
                launch_config(channels),
                c,
                n as i64,
                dim as i64,
                &read(&ig, n)?,
                &read(&dyg, n)?,
                &mut write(&mut dsg, channels)?,
            )
        }
        .map_err(|e| cuda(OP, e))?;
    }
    if !propagate_down {
        return Ok(());
    }
    let (ig, sg) = (input.gpu_data()?, slope.gpu_data()?);
    if in_place(x, y) {
        let mut dg = x.mutable_gpu_diff()?;
        // SAFETY: input and d hold n values, slope `channels`.
        return unsafe {
            prelu_backward_inplace_f32(
                gpu,
                launch_config(n),
                n as i64,
                c,
                dim as i64,
                &read(&ig, n)?,
                &read(&sg, channels)?,
                &mut write(&mut dg, n)?,
            )
        }
        .map_err(|e| cuda(OP, e));
    }
    let (dyg, mut dxg) = (y.gpu_diff()?, x.mutable_gpu_diff()?);
    // SAFETY: input, dy and dx hold n values, slope `channels`.
    unsafe {
        prelu_backward_f32(
            gpu,
            launch_config(n),
            n as i64,
            c,
            dim as i64,
            &read(&ig, n)?,
            &read(&sg, channels)?,
            &read(&dyg, n)?,
            &mut write(&mut dxg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}
