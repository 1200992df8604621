//! The CUDA side of Scale's forward pass (a deploy net's BatchNorm
//! partner); its backward pass, with the factor's gradient to sum per
//! channel, runs on the host.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};
use blob_runtime::Blob;

use super::Span;
use crate::gpu::{cuda, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `scale.cu`: Scale, `f32`.
    pub(crate) static SCALE = "scale.cu";
    /// `y = x scale (+ bias)`.
    pub(crate) fn scale_forward_f32(
        n: i64, dim: i64, inner: i64, x: &CudaView<'_, f32>, scale: &CudaView<'_, f32>,
        bias: &CudaView<'_, f32>, has_bias: i32, y: &mut CudaViewMut<'_, f32>
    );
    /// The same in place.
    pub(crate) fn scale_forward_inplace_f32(
        n: i64, dim: i64, inner: i64, scale: &CudaView<'_, f32>, bias: &CudaView<'_, f32>,
        has_bias: i32, y: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "Scale on the GPU";

/// `y = x scale (+ bias)`; `x` is `None` in place (`y` holds it).
pub(crate) fn forward(
    gpu: &Gpu,
    sp: Span,
    x: Option<&Blob<f32>>,
    (scale, bias): (&Blob<f32>, Option<&Blob<f32>>),
    y: &Blob<f32>,
) -> Result<()> {
    let n = y.count();
    let cfg = launch_config(n);
    let sg = scale.gpu_data()?;
    let bg = bias.map(Blob::gpu_data).transpose()?;
    let s = read(&sg, sp.dim)?;
    // No bias: the factors stand in for it, unread.
    let b = match &bg {
        Some(g) => read(g, sp.dim)?,
        None => read(&sg, sp.dim)?,
    };
    let has_bias = i32::from(bias.is_some());
    let (dim, inner) = (sp.dim as i64, sp.inner as i64);
    let mut yg = y.mutable_gpu_data()?;
    let mut yv = write(&mut yg, n)?;
    match x {
        Some(x) => {
            let xg = x.gpu_data()?;
            // SAFETY: x and y hold n values, scale and bias `dim`.
            unsafe {
                scale_forward_f32(
                    gpu,
                    cfg,
                    n as i64,
                    dim,
                    inner,
                    &read(&xg, n)?,
                    &s,
                    &b,
                    has_bias,
                    &mut yv,
                )
            }
        }
        // SAFETY: y holds n values, scale and bias `dim`.
        None => unsafe {
            scale_forward_inplace_f32(gpu, cfg, n as i64, dim, inner, &s, &b, has_bias, &mut yv)
        },
    }
    .map_err(|e| cuda(OP, e))
}
