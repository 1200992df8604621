//! The CUDA side of MVN: `mvn.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};

use crate::gpu::cuda;
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `mvn.cu`: MVN's normalization and its gradient, `f32`.
    pub(crate) static MVN = "mvn.cu";
    /// Each of the `groups` of `dim` values less its mean, over `std +
    /// eps` where the variance is normalized.
    pub(crate) fn mvn_forward_f32(
        groups: i64, dim: i64, normalize_variance: i32, eps: f64, x: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>
    );
    /// Each group's gradient, its statistics read again from `x`.
    pub(crate) fn mvn_backward_f32(
        groups: i64, dim: i64, normalize_variance: i32, eps: f64, x: &CudaView<'_, f32>,
        y: &CudaView<'_, f32>, dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "MVN on the GPU";

/// The forward pass over `groups` of `dim` values.
pub(crate) fn forward(
    gpu: &Gpu,
    (groups, dim): (usize, usize),
    (normalize_variance, eps): (bool, f64),
    x: &CudaView<'_, f32>,
    y: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    if groups == 0 {
        return Ok(());
    }
    let nv = i32::from(normalize_variance);
    // SAFETY: x and y hold groups x dim values.
    unsafe {
        mvn_forward_f32(
            gpu,
            launch_config(groups),
            groups as i64,
            dim as i64,
            nv,
            eps,
            x,
            y,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// The backward pass over `groups` of `dim` values.
pub(crate) fn backward(
    gpu: &Gpu,
    (groups, dim): (usize, usize),
    (normalize_variance, eps): (bool, f64),
    (x, y, dy): (&CudaView<'_, f32>, &CudaView<'_, f32>, &CudaView<'_, f32>),
    dx: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    if groups == 0 {
        return Ok(());
    }
    let nv = i32::from(normalize_variance);
    let (g, d) = (groups as i64, dim as i64);
    // SAFETY: x, y, dy and dx hold groups x dim values.
    unsafe { mvn_backward_f32(gpu, launch_config(groups), g, d, nv, eps, x, y, dy, dx) }
        .map_err(|e| cuda(OP, e))
}
