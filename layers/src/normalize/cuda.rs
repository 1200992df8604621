//! The CUDA side of Normalize. Each norm is a sum of squares: over an
//! image by `Gpu::add_sums`, over a pixel's channels by one thread per
//! pixel; both add in a fixed order, so a run repeats bit for bit.
//! Backward sums the same way each norm's dot of the normalized input with
//! the scaled gradient, and the factor's gradient per channel.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, Scratch, UnaryOp, launch_config};
use blob_kernels::sums::SumLayout;
use blob_runtime::Blob;

use crate::gpu::{cuda, int, read, write};
use crate::layer::{Result, in_place};

blob_kernels::cuda_kernels! {
    /// `normalize.cu`: the SSD fork's Normalize, `f32`.
    pub(crate) static NORMALIZE = "normalize.cu";
    /// Each pixel's sum over its channels.
    pub(crate) fn normalize_channel_sums_f32(
        pixels: i64, channels: i32, plane: i64, m: &CudaView<'_, f32>, out: &mut CudaViewMut<'_, f32>
    );
    /// Sums of squares made norms.
    pub(crate) fn normalize_root_f32(n: i64, eps: f32, norms: &mut CudaViewMut<'_, f32>);
    /// `y = x / norm * factor`.
    pub(crate) fn normalize_forward_f32(
        total: i64, channels: i32, plane: i64, across: i32, shared: i32, x: &CudaView<'_, f32>,
        norms: &CudaView<'_, f32>, scale: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// The same in place.
    pub(crate) fn normalize_forward_inplace_f32(
        total: i64, channels: i32, plane: i64, across: i32, shared: i32,
        norms: &CudaView<'_, f32>, scale: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// `x dy factor`, summed per norm.
    pub(crate) fn normalize_dot_terms_f32(
        total: i64, channels: i32, plane: i64, shared: i32, x: &CudaView<'_, f32>,
        dy: &CudaView<'_, f32>, scale: &CudaView<'_, f32>, out: &mut CudaViewMut<'_, f32>
    );
    /// `x / norm * dy`, summed per channel: the factor's gradient.
    pub(crate) fn normalize_scale_terms_f32(
        total: i64, channels: i32, plane: i64, across: i32, x: &CudaView<'_, f32>,
        dy: &CudaView<'_, f32>, norms: &CudaView<'_, f32>, out: &mut CudaViewMut<'_, f32>
    );
    /// The input's gradient.
    pub(crate) fn normalize_backward_f32(
        total: i64, channels: i32, plane: i64, across: i32, shared: i32, x: &CudaView<'_, f32>,
        dy: &CudaView<'_, f32>, scale: &CudaView<'_, f32>, norms: &CudaView<'_, f32>,
        dots: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "Normalize on the GPU";

/// A pass's input `(images, channels, plane)` and the layer's choices.
#[derive(Clone, Copy)]
pub(crate) struct Geometry {
    pub images: usize,
    pub channels: usize,
    pub plane: usize,
    pub across_spatial: bool,
    pub channel_shared: bool,
}

impl Geometry {
    fn total(&self) -> usize {
        self.images * self.channels * self.plane
    }

    /// How many norms: one per image, or one per pixel.
    fn norms(&self) -> usize {
        if self.across_spatial {
            self.images
        } else {
            self.images * self.plane
        }
    }

    /// The kernels' `(channels, plane, across, shared)` arguments.
    fn args(&self) -> Result<(i32, i64, i32, i32)> {
        Ok((
            int(OP, self.channels)?,
            self.plane as i64,
            i32::from(self.across_spatial),
            i32::from(self.channel_shared),
        ))
    }
}

/// What the GPU side keeps between calls: the norms of the last forward
/// pass (backward reads them), and room for terms and dots.
#[derive(Default)]
pub(crate) struct NormScratch {
    norms: Scratch<f32>,
    terms: Scratch<f32>,
    dots: Scratch<f32>,
}

/// `out[k]` = the sum of `terms` over norm `k`'s values.
fn sum_per_norm(
    gpu: &Gpu,
    g: Geometry,
    terms: &CudaView<'_, f32>,
    out: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let fail = |e| cuda(OP, e);
    if g.across_spatial {
        gpu.set(0.0, out).map_err(fail)?;
        return gpu
            .add_sums(
                &SumLayout::rows_of(g.images, g.channels * g.plane),
                terms,
                out,
            )
            .map_err(fail);
    }
    let (channels, plane, _, _) = g.args()?;
    let pixels = g.norms();
    // SAFETY: terms holds images * channels * plane values, out `pixels`.
    unsafe {
        normalize_channel_sums_f32(
            gpu,
            launch_config(pixels),
            pixels as i64,
            channels,
            plane,
            terms,
            out,
        )
    }
    .map_err(fail)
}

/// `y` from `x` (`None` in place: `y` holds it) scaled by `scale`, the
/// norms kept for backward.
pub(crate) fn forward(
    gpu: &Gpu,
    g: Geometry,
    eps: f32,
    x: Option<&Blob<f32>>,
    scale: &Blob<f32>,
    y: &Blob<f32>,
    scratch: &mut NormScratch,
) -> Result<()> {
    let fail = |e| cuda(OP, e);
    let (total, count) = (g.total(), g.norms());
    let mut norms = scratch.norms.grown(gpu, count).map_err(fail)?;
    {
        let source = x.unwrap_or(y).gpu_data()?;
        let mut squares = scratch.terms.grown(gpu, total).map_err(fail)?;
        gpu.unary(UnaryOp::Sqr, &read(&source, total)?, &mut squares)
            .map_err(fail)?;
        sum_per_norm(gpu, g, &squares.as_view(), &mut norms)?;
    }
    // SAFETY: norms holds count values.
    unsafe { normalize_root_f32(gpu, launch_config(count), count as i64, eps, &mut norms) }
        .map_err(fail)?;
    let (channels, plane, across, shared) = g.args()?;
    let sg = scale.gpu_data()?;
    let factors = read(&sg, scale.count())?;
    let mut yg = y.mutable_gpu_data()?;
    let mut out = write(&mut yg, total)?;
    let cfg = launch_config(total);
    match x {
        // SAFETY: x and y hold total values, norms count, the factors one
        // or one per channel.
        Some(x) => unsafe {
            normalize_forward_f32(
                gpu,
                cfg,
                total as i64,
                channels,
                plane,
                across,
                shared,
                &read(&x.gpu_data()?, total)?,
                &norms.as_view(),
                &factors,
                &mut out,
            )
        },
        // SAFETY: as above, y holding x.
        None => unsafe {
            normalize_forward_inplace_f32(
                gpu,
                cfg,
                total as i64,
                channels,
                plane,
                across,
                shared,
                &norms.as_view(),
                &factors,
                &mut out,
            )
        },
    }
    .map_err(fail)
}

/// Adds the factor's gradient to `scale`'s diff and, when `propagate`,
/// writes `bottom`'s; `input` is the forward pass's input (its copy, in
/// place).
pub(crate) fn backward(
    gpu: &Gpu,
    g: Geometry,
    input: &Blob<f32>,
    scale: &Blob<f32>,
    (bottom, top): (&Blob<f32>, &Blob<f32>),
    propagate: bool,
    scratch: &mut NormScratch,
) -> Result<()> {
    let fail = |e| cuda(OP, e);
    let (total, count) = (g.total(), g.norms());
    let (channels, plane, across, shared) = g.args()?;
    let cfg = launch_config(total);
    let norms = scratch.norms.view(count).ok_or_else(|| {
        crate::dyn_layer::bad_param("normalize", "backward before a forward pass on the GPU")
    })?;
    let mut terms = scratch.terms.grown(gpu, total).map_err(fail)?;
    let mut dots = scratch.dots.grown(gpu, count).map_err(fail)?;
    let xg = input.gpu_data()?;
    let x = read(&xg, total)?;
    let sg = scale.gpu_data()?;
    let factors = read(&sg, scale.count())?;
    {
        let dyg = top.gpu_diff()?;
        let dy = read(&dyg, total)?;
        // SAFETY: x, dy and terms hold total values, the factors one or
        // one per channel.
        unsafe {
            normalize_dot_terms_f32(
                gpu,
                cfg,
                total as i64,
                channels,
                plane,
                shared,
                &x,
                &dy,
                &factors,
                &mut terms,
            )
        }
        .map_err(fail)?;
        sum_per_norm(gpu, g, &terms.as_view(), &mut dots)?;
        // SAFETY: x, dy and terms hold total values, norms count.
        unsafe {
            normalize_scale_terms_f32(
                gpu,
                cfg,
                total as i64,
                channels,
                plane,
                across,
                &x,
                &dy,
                &norms,
                &mut terms,
            )
        }
        .map_err(fail)?;
        let layout = if g.channel_shared {
            SumLayout::rows_of(1, total)
        } else {
            SumLayout::channels_of(g.images, g.channels, g.plane)
        };
        let mut dsg = scale.mutable_gpu_diff()?;
        gpu.add_sums(
            &layout,
            &terms.as_view(),
            &mut write(&mut dsg, scale.count())?,
        )
        .map_err(fail)?;
        if propagate && in_place(bottom, top) {
            // The gradient is written over dy: read it from a copy.
            gpu.copy(&dy, &mut terms).map_err(fail)?;
        }
    }
    if !propagate {
        return Ok(());
    }
    let dyg = (!in_place(bottom, top))
        .then(|| top.gpu_diff())
        .transpose()?;
    let dy = match &dyg {
        Some(guard) => read(guard, total)?,
        None => terms.as_view(),
    };
    let mut dxg = bottom.mutable_gpu_diff()?;
    // SAFETY: x, dy and dx hold total values, norms and dots count, the
    // factors one or one per channel.
    unsafe {
        normalize_backward_f32(
            gpu,
            cfg,
            total as i64,
            channels,
            plane,
            across,
            shared,
            &x,
            &dy,
            &factors,
            &norms,
            &dots.as_view(),
            &mut write(&mut dxg, total)?,
        )
    }
    .map_err(fail)
}
