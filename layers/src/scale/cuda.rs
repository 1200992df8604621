//! The CUDA sides of Scale (BatchNorm's partner) and Bias: the forward
//! passes, and the backward passes with the factor's and bias's gradients
//! summed per channel by `Gpu::add_sums` (a fixed order: a run repeats
//! bit for bit).

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{BinaryOp, Gpu, launch_config};
use blob_kernels::sums::SumLayout;
use blob_runtime::Blob;

use super::Span;
use crate::gpu::{SumScratch, cuda, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `scale.cu`: Scale and Bias, `f32`.
    pub(crate) static SCALE = "scale.cu";
    /// `y = x (scale) (+ bias)`.
    pub(crate) fn scale_forward_f32(
        n: i64, dim: i64, inner: i64, x: &CudaView<'_, f32>, scale: &CudaView<'_, f32>,
        has_scale: i32, bias: &CudaView<'_, f32>, has_bias: i32, y: &mut CudaViewMut<'_, f32>
    );
    /// The same in place.
    pub(crate) fn scale_forward_inplace_f32(
        n: i64, dim: i64, inner: i64, scale: &CudaView<'_, f32>, has_scale: i32,
        bias: &CudaView<'_, f32>, has_bias: i32, y: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "Scale on the GPU";

/// `y = x scale (+ bias)`, or `x + bias` with no scale (Bias); `x` is
/// `None` in place (`y` holds it).
pub(crate) fn forward(
    gpu: &Gpu,
    sp: Span,
    x: Option<&Blob<f32>>,
    (scale, bias): (Option<&Blob<f32>>, Option<&Blob<f32>>),
    y: &Blob<f32>,
) -> Result<()> {
    let n = y.count();
    let sg = scale.map(Blob::gpu_data).transpose()?;
    let s = sg.as_ref().map(|g| read(g, sp.dim)).transpose()?;
    let bg = bias.map(Blob::gpu_data).transpose()?;
    let b = bg.as_ref().map(|g| read(g, sp.dim)).transpose()?;
    let xg = x.map(Blob::gpu_data).transpose()?;
    let xv = xg.as_ref().map(|g| read(g, n)).transpose()?;
    let mut yg = y.mutable_gpu_data()?;
    apply(
        gpu,
        sp,
        xv.as_ref(),
        (s.as_ref(), b.as_ref()),
        &mut write(&mut yg, n)?,
    )
}

/// `dst = src (scale) (+ bias)` over `sp`; `src` `None` in place (`dst`
/// holds it). At least one of the two is given.
fn apply(
    gpu: &Gpu,
    sp: Span,
    src: Option<&CudaView<'_, f32>>,
    (scale, bias): (Option<&CudaView<'_, f32>>, Option<&CudaView<'_, f32>>),
    dst: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let n = dst.len();
    let cfg = launch_config(n);
    // A missing one: the other stands in for it, unread.
    let (s, b) = match (scale, bias) {
        (Some(s), Some(b)) => (s, b),
        (Some(s), None) => (s, s),
        (None, Some(b)) => (b, b),
        (None, None) => unreachable!("Scale and Bias always pass a factor or a bias"),
    };
    let (has_scale, has_bias) = (i32::from(scale.is_some()), i32::from(bias.is_some()));
    let (dim, inner) = (sp.dim as i64, sp.inner as i64);
    match src {
        // SAFETY: src and dst hold n values, scale and bias `dim`.
        Some(src) => unsafe {
            scale_forward_f32(
                gpu, cfg, n as i64, dim, inner, src, s, has_scale, b, has_bias, dst,
            )
        },
        // SAFETY: dst holds n values, scale and bias `dim`.
        None => unsafe {
            scale_forward_inplace_f32(
                gpu, cfg, n as i64, dim, inner, s, has_scale, b, has_bias, dst,
            )
        },
    }
    .map_err(|e| cuda(OP, e))
}

/// The bias's gradient from `dy`: summed per channel, added to its diff
/// when `learned`, else written there (a second bottom's).
fn bias_gradient(
    gpu: &Gpu,
    layout: &SumLayout,
    dy: &CudaView<'_, f32>,
    sums: &mut CudaViewMut<'_, f32>,
    (bias, dim): (&Blob<f32>, usize),
    learned: bool,
) -> Result<()> {
    let fail = |e| cuda(OP, e);
    gpu.set(0.0, sums).map_err(fail)?;
    gpu.add_sums(layout, dy, sums).map_err(fail)?;
    let mut dbg = bias.mutable_gpu_diff()?;
    let mut db = write(&mut dbg, dim)?;
    if learned {
        gpu.axpy(1.0, &sums.as_view(), &mut db).map_err(fail)
    } else {
        gpu.copy(&sums.as_view(), &mut db).map_err(fail)
    }
}

/// Bias's backward pass: the bias's gradient when `wanted.factor` (added
/// when `wanted.learned`, else written), and `x`'s (a copy of `y`'s,
/// none to make in place) when `wanted.input`.
pub(crate) fn bias_backward(
    gpu: &Gpu,
    sp: Span,
    bias: &Blob<f32>,
    (x, y): (&Blob<f32>, &Blob<f32>),
    wanted: Wanted,
    scratch: &mut SumScratch,
) -> Result<()> {
    let n = y.count();
    let fail = |e| cuda(OP, e);
    let dyg = y.gpu_diff()?;
    let dy = read(&dyg, n)?;
    if wanted.factor {
        let layout = SumLayout::channels_of(sp.outer, sp.dim, sp.inner);
        let mut sums = scratch.sums.grown(gpu, sp.dim).map_err(fail)?;
        bias_gradient(gpu, &layout, &dy, &mut sums, (bias, sp.dim), wanted.learned)?;
    }
    if wanted.input && !crate::layer::in_place(x, y) {
        let mut dxg = x.mutable_gpu_diff()?;
        gpu.copy(&dy, &mut write(&mut dxg, n)?).map_err(fail)?;
    }
    Ok(())
}

/// What a backward pass computes: the bias's gradient (added) where there
/// is a bias, the factor's (added when `learned`, else written) when
/// `factor`, and the input's when `input`. For Bias, `factor` is its
/// bias's gradient.
#[derive(Clone, Copy)]
pub(crate) struct Wanted {
    pub learned: bool,
    pub factor: bool,
    pub input: bool,
}

/// Scale's backward pass: `input` is the forward pass's input (the copy
/// it kept, in place), `x` and `y` the layer's bottom and top.
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward(
    gpu: &Gpu,
    sp: Span,
    input: &Blob<f32>,
    (scale, bias): (&Blob<f32>, Option<&Blob<f32>>),
    (x, y): (&Blob<f32>, &Blob<f32>),
    wanted: Wanted,
    scratch: &mut SumScratch,
) -> Result<()> {
    let n = y.count();
    let fail = |e| cuda(OP, e);
    let layout = SumLayout::channels_of(sp.outer, sp.dim, sp.inner);
    {
        let dyg = y.gpu_diff()?;
        let dy = read(&dyg, n)?;
        let mut sums = scratch.sums.grown(gpu, sp.dim).map_err(fail)?;
        if let Some(bias) = bias {
            bias_gradient(gpu, &layout, &dy, &mut sums, (bias, sp.dim), true)?;
        }
        if wanted.factor {
            let mut terms = scratch.terms.grown(gpu, n).map_err(fail)?;
            let ig = input.gpu_data()?;
            gpu.binary(BinaryOp::Mul, &dy, &read(&ig, n)?, &mut terms)
                .map_err(fail)?;
            gpu.set(0.0, &mut sums).map_err(fail)?;
            gpu.add_sums(&layout, &terms.as_view(), &mut sums)
                .map_err(fail)?;
            let mut dsg = scale.mutable_gpu_diff()?;
            let mut ds = write(&mut dsg, sp.dim)?;
            if wanted.learned {
                gpu.axpy(1.0, &sums.as_view(), &mut ds).map_err(fail)?;
            } else {
                gpu.copy(&sums.as_view(), &mut ds).map_err(fail)?;
            }
        }
    }
    if !wanted.input {
        return Ok(());
    }
    let sg = scale.gpu_data()?;
    let factors = read(&sg, sp.dim)?;
    if crate::layer::in_place(x, y) {
        let mut dg = y.mutable_gpu_diff()?;
        return apply(
            gpu,
            sp,
            None,
            (Some(&factors), None),
            &mut write(&mut dg, n)?,
        );
    }
    let (dyg, mut dxg) = (y.gpu_diff()?, x.mutable_gpu_diff()?);
    apply(
        gpu,
        sp,
        Some(&read(&dyg, n)?),
        (Some(&factors), None),
        &mut write(&mut dxg, n)?,
    )
}
