//! The CUDA side of Eltwise: one element-wise kernel per bottom.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};
use blob_runtime::Blob;

use super::Op;
use crate::gpu::{cuda, int, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `eltwise.cu`: Eltwise, `f32`.
    pub(crate) static ELTWISE = "eltwise.cu";
    /// `y = c x`.
    pub(crate) fn eltwise_scale_f32(n: i64, c: f32, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>);
    /// `y += c x`.
    pub(crate) fn eltwise_add_scaled_f32(n: i64, c: f32, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>);
    /// `y *= x`.
    pub(crate) fn eltwise_multiply_f32(n: i64, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>);
    /// `y = max(a, b)`, `mask` the winner (0 or 1).
    pub(crate) fn eltwise_max_first_f32(
        n: i64, a: &CudaView<'_, f32>, b: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>,
        mask: &mut CudaViewMut<'_, f32>
    );
    /// `y = max(y, x)`, `mask = k` where `x` wins.
    pub(crate) fn eltwise_max_next_f32(
        n: i64, k: i32, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>, mask: &mut CudaViewMut<'_, f32>
    );
    /// `dx = dy y / x`.
    pub(crate) fn eltwise_prod_grad_f32(
        n: i64, dy: &CudaView<'_, f32>, y: &CudaView<'_, f32>, x: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
    /// `dx = mask == k ? dy : 0`.
    pub(crate) fn eltwise_max_grad_f32(
        n: i64, k: i32, dy: &CudaView<'_, f32>, mask: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "Eltwise on the GPU";

/// `y` from `bottoms`; `mask` (of `y`'s count, on the GPU) records MAX's
/// winners.
pub(crate) fn forward(
    gpu: &Gpu,
    op: Op,
    coeffs: &[f32],
    bottoms: &[&Blob<f32>],
    y: &Blob<f32>,
    mask: &Blob<f32>,
) -> Result<()> {
    let n = y.count();
    let cfg = launch_config(n);
    let mut yg = y.mutable_gpu_data()?;
    let mut yv = write(&mut yg, n)?;
    match op {
        Op::Sum => {
            for (i, b) in bottoms.iter().enumerate() {
                let xg = b.gpu_data()?;
                let x = read(&xg, n)?;
                // SAFETY: x and y hold n values.
                unsafe {
                    if i == 0 {
                        eltwise_scale_f32(gpu, cfg, n as i64, coeffs[i], &x, &mut yv)
                    } else {
                        eltwise_add_scaled_f32(gpu, cfg, n as i64, coeffs[i], &x, &mut yv)
                    }
                }
                .map_err(|e| cuda(OP, e))?;
            }
        }
        Op::Prod => {
            for (i, b) in bottoms.iter().enumerate() {
                let xg = b.gpu_data()?;
                let x = read(&xg, n)?;
                // SAFETY: x and y hold n values.
                unsafe {
                    if i == 0 {
                        eltwise_scale_f32(gpu, cfg, n as i64, 1.0, &x, &mut yv)
                    } else {
                        eltwise_multiply_f32(gpu, cfg, n as i64, &x, &mut yv)
                    }
                }
                .map_err(|e| cuda(OP, e))?;
            }
        }
        Op::Max => {
            let mut mg = mask.mutable_gpu_data()?;
            let mut m = write(&mut mg, n)?;
            let (ag, bg) = (bottoms[0].gpu_data()?, bottoms[1].gpu_data()?);
            // SAFETY: a, b, y and mask hold n values.
            unsafe {
                eltwise_max_first_f32(
                    gpu,
                    cfg,
                    n as i64,
                    &read(&ag, n)?,
                    &read(&bg, n)?,
                    &mut yv,
                    &mut m,
                )
            }
            .map_err(|e| cuda(OP, e))?;
            for (k, b) in bottoms.iter().enumerate().skip(2) {
                let xg = b.gpu_data()?;
                // SAFETY: x, y and mask hold n values.
                unsafe {
                    eltwise_max_next_f32(
                        gpu,
                        cfg,
                        n as i64,
                        int(OP, k)?,
                        &read(&xg, n)?,
                        &mut yv,
                        &mut m,
                    )
                }
                .map_err(|e| cuda(OP, e))?;
            }
        }
    }
    Ok(())
}

/// The diff of each bottom `propagate_down` names, from `y`'s.
pub(crate) fn backward(
    gpu: &Gpu,
    (op, stable_prod_grad): (Op, bool),
    coeffs: &[f32],
    (y, mask): (&Blob<f32>, &Blob<f32>),
    propagate_down: &[bool],
    bottoms: &[&Blob<f32>],
) -> Result<()> {
    let n = y.count();
    let cfg = launch_config(n);
    let (yg, dyg) = (y.gpu_data()?, y.gpu_diff()?);
    let (yv, dy) = (read(&yg, n)?, read(&dyg, n)?);
    for (i, b) in bottoms.iter().enumerate() {
        if !propagate_down[i] {
            continue;
        }
        let mut dxg = b.mutable_gpu_diff()?;
        let mut dx = write(&mut dxg, n)?;
        match op {
            Op::Sum => {
                // SAFETY: dy and dx hold n values.
                unsafe { eltwise_scale_f32(gpu, cfg, n as i64, coeffs[i], &dy, &mut dx) }
                    .map_err(|e| cuda(OP, e))?;
            }
            Op::Prod if stable_prod_grad => {
                // SAFETY: every view holds n values.
                unsafe { eltwise_scale_f32(gpu, cfg, n as i64, 1.0, &dy, &mut dx) }
                    .map_err(|e| cuda(OP, e))?;
                for (j, other) in bottoms.iter().enumerate() {
                    if j != i {
                        let og = other.gpu_data()?;
                        // SAFETY: every view holds n values.
                        unsafe {
                            eltwise_multiply_f32(gpu, cfg, n as i64, &read(&og, n)?, &mut dx)
                        }
                        .map_err(|e| cuda(OP, e))?;
                    }
                }
            }
            Op::Prod => {
                let xg = b.gpu_data()?;
                // SAFETY: every view holds n values.
                unsafe {
                    eltwise_prod_grad_f32(gpu, cfg, n as i64, &dy, &yv, &read(&xg, n)?, &mut dx)
                }
                .map_err(|e| cuda(OP, e))?;
            }
            Op::Max => {
                let mg = mask.gpu_data()?;
                // SAFETY: every view holds n values.
                unsafe {
                    eltwise_max_grad_f32(
                        gpu,
                        cfg,
                        n as i64,
                        int(OP, i)?,
                        &dy,
                        &read(&mg, n)?,
                        &mut dx,
                    )
                }
                .map_err(|e| cuda(OP, e))?;
            }
        }
    }
    Ok(())
}
