//! The CUDA side of Reduction: `reduction.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};

use crate::gpu::cuda;
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `reduction.cu`: Reduction's sums and gradients, `f32`.
    pub(crate) static REDUCTION = "reduction.cu";
    /// Each of the `outputs` reductions of `dim` values, summed in order
    /// in double, times `coeff` (`op`: 0 SUM, 1 ASUM, 2 SUMSQ, 3 MEAN).
    pub(crate) fn reduction_forward_f32(
        outputs: i64, dim: i64, op: i32, coeff: f64, x: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>
    );
    /// Each of the `n` inputs' gradient from its output's, times `scale`.
    pub(crate) fn reduction_backward_f32(
        n: i64, dim: i64, op: i32, scale: f64, x: &CudaView<'_, f32>, dy: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "Reduction on the GPU";

/// The forward pass: `outputs` reductions of `dim` values each.
pub(crate) fn forward(
    gpu: &Gpu,
    (outputs, dim): (usize, usize),
    (op, coeff): (i32, f64),
    x: &CudaView<'_, f32>,
    y: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    if outputs == 0 {
        return Ok(());
    }
    // SAFETY: x holds outputs x dim values, y outputs.
    unsafe {
        reduction_forward_f32(
            gpu,
            launch_config(outputs),
            outputs as i64,
            dim as i64,
            op,
            coeff,
            x,
            y,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// The backward pass into the `n` inputs' gradients.
pub(crate) fn backward(
    gpu: &Gpu,
    (n, dim): (usize, usize),
    (op, scale): (i32, f64),
    (x, dy): (&CudaView<'_, f32>, &CudaView<'_, f32>),
    dx: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    // SAFETY: x and dx hold n values, dy n / dim.
    unsafe {
        reduction_backward_f32(
            gpu,
            launch_config(n),
            n as i64,
            dim as i64,
            op,
            scale,
            x,
            dy,
            dx,
        )
    }
    .map_err(|e| cuda(OP, e))
}
