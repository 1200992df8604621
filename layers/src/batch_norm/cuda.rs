//! The CUDA side of BatchNorm: the forward pass with global statistics
//! (a deploy net's) or the batch's (training, the running sums updated
//! on the device), and both backward passes. The per-channel sums are
//! `Gpu::add_sums`'s, in a fixed order: a run repeats bit for bit.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{BinaryOp, Gpu, launch_config};
use blob_kernels::sums::SumLayout;
use blob_runtime::Blob;

use crate::gpu::{SumScratch, cuda, int, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `batch_norm.cu`: BatchNorm with global statistics, `f32`.
    pub(crate) static BATCH_NORM = "batch_norm.cu";
    /// `y = (x - mean) / std` per channel.
    pub(crate) fn batch_norm_global_f32(
        n: i64, channels: i32, spatial: i64, x: &CudaView<'_, f32>, stats: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>
    );
    /// The same in place.
    pub(crate) fn batch_norm_global_inplace_f32(
        n: i64, channels: i32, spatial: i64, stats: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// The means from the sums.
    pub(crate) fn batch_norm_means_f32(
        channels: i32, count: f32, sums: &CudaView<'_, f32>, stats: &mut CudaViewMut<'_, f32>
    );
    /// The variance's terms.
    pub(crate) fn batch_norm_square_dev_f32(
        n: i64, channels: i32, spatial: i64, x: &CudaView<'_, f32>, stats: &CudaView<'_, f32>,
        out: &mut CudaViewMut<'_, f32>
    );
    /// The deviations, and the running sums updated.
    pub(crate) fn batch_norm_finish_f32(
        channels: i32, count: f32, eps: f64, maf: f64, correction: f64,
        square_sums: &CudaView<'_, f32>, stats: &mut CudaViewMut<'_, f32>,
        run_mean: &mut CudaViewMut<'_, f32>, run_var: &mut CudaViewMut<'_, f32>,
        run_factor: &mut CudaViewMut<'_, f32>
    );
    /// The input's gradient with batch statistics.
    pub(crate) fn batch_norm_backward_f32(
        n: i64, channels: i32, spatial: i64, count: f32, dy: &CudaView<'_, f32>,
        xnorm: &CudaView<'_, f32>, sums: &CudaView<'_, f32>, stats: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
    /// The same in place.
    pub(crate) fn batch_norm_backward_inplace_f32(
        n: i64, channels: i32, spatial: i64, count: f32, xnorm: &CudaView<'_, f32>,
        sums: &CudaView<'_, f32>, stats: &CudaView<'_, f32>, d: &mut CudaViewMut<'_, f32>
    );
    /// `d = d / std` (global statistics).
    pub(crate) fn batch_norm_backward_global_f32(
        n: i64, channels: i32, spatial: i64, stats: &CudaView<'_, f32>, d: &mut CudaViewMut<'_, f32>
    );
}

/// The sizes of a pass: `(batch, channels, values per channel per item)`.
pub(crate) type Dims = (usize, usize, usize);

const OP: &str = "BatchNorm on the GPU";

/// `stats` (the means, then the deviations) from the batch `x` (`y` in
/// place), and the running sums `(mean, variance, factor)` updated with
/// `maf`, as Caffe's training pass does.
#[allow(clippy::too_many_arguments)]
pub(crate) fn batch_statistics(
    gpu: &Gpu,
    (batch, channels, spatial): Dims,
    (eps, maf): (f64, f64),
    x: &Blob<f32>,
    stats: &Blob<f32>,
    running: [&Blob<f32>; 3],
    scratch: &mut SumScratch,
) -> Result<()> {
    let (n, c) = (x.count(), int(OP, channels)?);
    let per_channel = (batch * spatial) as f32;
    let correction = if per_channel > 1.0 {
        f64::from(per_channel) / (f64::from(per_channel) - 1.0)
    } else {
        1.0
    };
    let layout = SumLayout::channels_of(batch, channels, spatial);
    let fail = |e| cuda(OP, e);
    let mut sums = scratch.sums.grown(gpu, channels).map_err(fail)?;
    let mut terms = scratch.terms.grown(gpu, n).map_err(fail)?;
    let xg = x.gpu_data()?;
    let xv = read(&xg, n)?;
    let mut sg = stats.mutable_gpu_data()?;
    let mut sv = write(&mut sg, 2 * channels)?;
    gpu.set(0.0, &mut sums).map_err(fail)?;
    gpu.add_sums(&layout, &xv, &mut sums).map_err(fail)?;
    // SAFETY: sums holds channels values, stats 2 * channels.
    unsafe {
        batch_norm_means_f32(
            gpu,
            launch_config(channels),
            c,
            per_channel,
            &sums.as_view(),
            &mut sv,
        )
    }
    .map_err(fail)?;
    // SAFETY: x and terms hold n values, stats 2 * channels.
    unsafe {
        batch_norm_square_dev_f32(
            gpu,
            launch_config(n),
            n as i64,
            c,
            spatial as i64,
            &xv,
            &sv.as_view(),
            &mut terms,
        )
    }
    .map_err(fail)?;
    gpu.set(0.0, &mut sums).map_err(fail)?;
    gpu.add_sums(&layout, &terms.as_view(), &mut sums)
        .map_err(fail)?;
    let [mean, var, factor] = running;
    let (mut mg, mut vg, mut fg) = (
        mean.mutable_gpu_data()?,
        var.mutable_gpu_data()?,
        factor.mutable_gpu_data()?,
    );
    // SAFETY: sums, mean and var hold channels values, stats twice that,
    // factor one.
    unsafe {
        batch_norm_finish_f32(
            gpu,
            launch_config(channels),
            c,
            per_channel,
            eps,
            maf,
            correction,
            &sums.as_view(),
            &mut sv,
            &mut write(&mut mg, channels)?,
            &mut write(&mut vg, channels)?,
            &mut write(&mut fg, 1)?,
        )
    }
    .map_err(fail)
}

/// The input's gradient: with batch statistics (`xnorm` the normalized
/// output the forward pass kept), or global ones (`xnorm` `None`); in
/// place when `x` is `y`.
pub(crate) fn backward(
    gpu: &Gpu,
    (batch, channels, spatial): Dims,
    xnorm: Option<&Blob<f32>>,
    stats: &Blob<f32>,
    (x, y): (&Blob<f32>, &Blob<f32>),
    scratch: &mut SumScratch,
) -> Result<()> {
    let (n, c) = (y.count(), int(OP, channels)?);
    let fail = |e| cuda(OP, e);
    let sg = stats.gpu_data()?;
    let sv = read(&sg, 2 * channels)?;
    let cfg = launch_config(n);
    let same = crate::layer::in_place(x, y);
    let Some(xnorm) = xnorm else {
        if !same {
            let dyg = y.gpu_diff()?;
            let mut dxg = x.mutable_gpu_diff()?;
            let mut dx = write(&mut dxg, n)?;
            gpu.copy(&read(&dyg, n)?, &mut dx).map_err(fail)?;
        }
        let mut dg = x.mutable_gpu_diff()?;
        // SAFETY: the diff holds n values, stats 2 * channels.
        return unsafe {
            batch_norm_backward_global_f32(
                gpu,
                cfg,
                n as i64,
                c,
                spatial as i64,
                &sv,
                &mut write(&mut dg, n)?,
            )
        }
        .map_err(fail);
    };
    let layout = SumLayout::channels_of(batch, channels, spatial);
    let per_channel = (batch * spatial) as f32;
    let mut sums = scratch.sums.grown(gpu, 2 * channels).map_err(fail)?;
    let mut terms = scratch.terms.grown(gpu, n).map_err(fail)?;
    let ng = xnorm.gpu_data()?;
    let nv = read(&ng, n)?;
    gpu.set(0.0, &mut sums).map_err(fail)?;
    {
        let dyg = y.gpu_diff()?;
        let dy = read(&dyg, n)?;
        gpu.binary(BinaryOp::Mul, &dy, &nv, &mut terms)
            .map_err(fail)?;
        gpu.add_sums(&layout, &dy, &mut sums.slice_mut(..channels))
            .map_err(fail)?;
        gpu.add_sums(&layout, &terms.as_view(), &mut sums.slice_mut(channels..))
            .map_err(fail)?;
        if !same {
            let mut dxg = x.mutable_gpu_diff()?;
            // SAFETY: dy, xnorm and dx hold n values, sums and stats
            // 2 * channels.
            return unsafe {
                batch_norm_backward_f32(
                    gpu,
                    cfg,
                    n as i64,
                    c,
                    spatial as i64,
                    per_channel,
                    &dy,
                    &nv,
                    &sums.as_view(),
                    &sv,
                    &mut write(&mut dxg, n)?,
                )
            }
            .map_err(fail);
        }
    }
    let mut dg = y.mutable_gpu_diff()?;
    // SAFETY: as above, the diff taking dy's place.
    unsafe {
        batch_norm_backward_inplace_f32(
            gpu,
            cfg,
            n as i64,
            c,
            spatial as i64,
            per_channel,
            &nv,
            &sums.as_view(),
            &sv,
            &mut write(&mut dg, n)?,
        )
    }
    .map_err(fail)
}

/// `y = (x - mean) / std`, `stats` holding the means then the
/// deviations; `x` is `None` in place.
pub(crate) fn forward(
    gpu: &Gpu,
    (channels, spatial): (usize, usize),
    x: Option<&Blob<f32>>,
    stats: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let n = y.count();
    let cfg = launch_config(n);
    let c = int(OP, channels)?;
    let sg = stats.gpu_data()?;
    let s = read(&sg, 2 * channels)?;
    let mut yg = y.mutable_gpu_data()?;
    let mut yv = write(&mut yg, n)?;
    match x {
        Some(x) => {
            let xg = x.gpu_data()?;
            // SAFETY: x and y hold n values, stats 2 * channels.
            unsafe {
                batch_norm_global_f32(
                    gpu,
                    cfg,
                    n as i64,
                    c,
                    spatial as i64,
                    &read(&xg, n)?,
                    &s,
                    &mut yv,
                )
            }
        }
        // SAFETY: y holds n values, stats 2 * channels.
        None => unsafe {
            batch_norm_global_inplace_f32(gpu, cfg, n as i64, c, spatial as i64, &s, &mut yv)
        },
    }
    .map_err(|e| cuda(OP, e))
}
