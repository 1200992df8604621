//! The CUDA side of EuclideanLoss, SigmoidCrossEntropyLoss and
//! ContrastiveLoss (`loss.cu`): their terms in double, summed in runs and the runs in
//! order into the loss's one value on the GPU, read only when the loss is
//! asked for; the gradients from the same terms.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, Scratch, launch_config};
use blob_runtime::Blob;

use crate::gpu::{cuda, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `loss.cu`: EuclideanLoss, SigmoidCrossEntropyLoss and ContrastiveLoss, `f32`.
    pub(crate) static LOSS = "loss.cu";
    /// Each run's sum of `(a - b)^2`, and its length.
    pub(crate) fn euclidean_runs_f32(
        n: i64, run: i64, a: &CudaView<'_, f32>, b: &CudaView<'_, f32>,
        sums: &mut CudaViewMut<'_, f64>, counts: &mut CudaViewMut<'_, f64>
    );
    /// `dx = alpha (a - b)`.
    pub(crate) fn euclidean_backward_f32(
        n: i64, alpha: f64, a: &CudaView<'_, f32>, b: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
    /// Each run's cross-entropy, and its targets not ignored.
    pub(crate) fn sigmoid_cross_entropy_runs_f32(
        n: i64, run: i64, x: &CudaView<'_, f32>, t: &CudaView<'_, f32>, has_ignore: i32,
        ignore: i32, sums: &mut CudaViewMut<'_, f64>, counts: &mut CudaViewMut<'_, f64>
    );
    /// The runs added in order; `loss[0] = sum / divisor` (the count for 0).
    pub(crate) fn loss_total_f32(
        runs: i64, sums: &CudaView<'_, f64>, counts: &CudaView<'_, f64>, divisor: f64,
        totals: &mut CudaViewMut<'_, f64>, loss: &mut CudaViewMut<'_, f32>
    );
    /// `dx = (sigmoid(x) - t) weight / divisor`, 0 where `t` is ignored.
    pub(crate) fn sigmoid_cross_entropy_backward_f32(
        n: i64, x: &CudaView<'_, f32>, t: &CudaView<'_, f32>, has_ignore: i32, ignore: i32,
        weight: f64, divisor: f64, totals: &CudaView<'_, f64>, dx: &mut CudaViewMut<'_, f32>
    );
    /// Each pair's contrastive term (and a count of 1).
    pub(crate) fn contrastive_pairs_f32(
        pairs: i64, channels: i64, a: &CudaView<'_, f32>, b: &CudaView<'_, f32>,
        y: &CudaView<'_, f32>, margin: f64, legacy: i32, terms: &mut CudaViewMut<'_, f64>,
        counts: &mut CudaViewMut<'_, f64>
    );
    /// Each pair's gradient, `alpha` its similar pairs' factor.
    pub(crate) fn contrastive_backward_f32(
        pairs: i64, channels: i64, a: &CudaView<'_, f32>, b: &CudaView<'_, f32>,
        y: &CudaView<'_, f32>, margin: f64, legacy: i32, alpha: f64,
        dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "a loss on the GPU";

/// Values a thread sums in order: enough runs for the GPU's threads on a
/// large input, few for the one thread that adds the runs.
const RUN: usize = 256;

/// Where a loss keeps its runs' sums and counts, and the totals its
/// backward pass reads (the count of targets not ignored).
#[derive(Default)]
pub(crate) struct LossScratch {
    sums: Scratch<f64>,
    counts: Scratch<f64>,
    totals: Scratch<f64>,
}

/// The runs of `n` values.
fn runs(n: usize) -> usize {
    n.div_ceil(RUN).max(1)
}

/// ContrastiveLoss's pairs: features `a` and `b` of `channels` each,
/// similarity `y`, its margin and form.
pub(crate) struct Pairs<'a> {
    pub a: &'a Blob<f32>,
    pub b: &'a Blob<f32>,
    pub y: &'a Blob<f32>,
    pub margin: f64,
    pub legacy: bool,
}

/// Which terms a loss sums.
pub(crate) enum Terms<'a> {
    /// ContrastiveLoss: one term a pair.
    Contrastive(Pairs<'a>),
    /// EuclideanLoss: `(a - b)^2`.
    Squares { a: &'a Blob<f32>, b: &'a Blob<f32> },
    /// SigmoidCrossEntropyLoss of scores `x` against targets `t`.
    CrossEntropy {
        x: &'a Blob<f32>,
        t: &'a Blob<f32>,
        ignore: Option<i64>,
    },
}

/// A label to ignore as the kernels take it.
fn ignore_args(ignore: Option<i64>) -> Result<(i32, i32)> {
    match ignore {
        None => Ok((0, 0)),
        Some(label) => {
            let label = i32::try_from(label).map_err(|_| {
                crate::dyn_layer::bad_param(
                    OP,
                    format!("ignore_label {label} does not fit the kernel's int"),
                )
            })?;
            Ok((1, label))
        }
    }
}

/// The terms' sum divided by `divisor` (by the count of terms not
/// ignored where `divisor` is 0) into `loss`'s one value. Nothing is read
/// back: the host does not wait.
pub(crate) fn loss(
    gpu: &Gpu,
    scratch: &mut LossScratch,
    terms: Terms<'_>,
    divisor: f64,
    loss: &Blob<f32>,
) -> Result<()> {
    let err = |e| cuda(OP, e);
    let (first, second) = match &terms {
        Terms::Squares { a, b } => (*a, *b),
        Terms::CrossEntropy { x, t, .. } => (*x, *t),
        Terms::Contrastive(p) => (p.a, p.b),
    };
    let n = first.count();
    let runs = match &terms {
        Terms::Contrastive(p) => p.y.count(),
        _ => runs(n),
    };
    let (fg, sg) = (first.gpu_data()?, second.gpu_data()?);
    let (f, s) = (read(&fg, n)?, read(&sg, n)?);
    {
        let mut sums = scratch.sums.grown(gpu, runs).map_err(err)?;
        let mut counts = scratch.counts.grown(gpu, runs).map_err(err)?;
        let config = launch_config(runs);
        match terms {
            // SAFETY: both inputs hold n values; sums and counts one a run.
            Terms::Squares { .. } => unsafe {
                euclidean_runs_f32(
                    gpu,
                    config,
                    n as i64,
                    RUN as i64,
                    &f,
                    &s,
                    &mut sums,
                    &mut counts,
                )
            },
            Terms::Contrastive(p) => {
                let yg = p.y.gpu_data()?;
                // SAFETY: a and b hold a `channels` row a pair, y and
                // the terms and counts one value a pair.
                unsafe {
                    contrastive_pairs_f32(
                        gpu,
                        config,
                        runs as i64,
                        (n / runs.max(1)) as i64,
                        &f,
                        &s,
                        &read(&yg, runs)?,
                        p.margin,
                        i32::from(p.legacy),
                        &mut sums,
                        &mut counts,
                    )
                }
            }
            Terms::CrossEntropy { ignore, .. } => {
                let (has_ignore, label) = ignore_args(ignore)?;
                // SAFETY: as above.
                unsafe {
                    sigmoid_cross_entropy_runs_f32(
                        gpu,
                        config,
                        n as i64,
                        RUN as i64,
                        &f,
                        &s,
                        has_ignore,
                        label,
                        &mut sums,
                        &mut counts,
                    )
                }
            }
        }
        .map_err(err)?;
    }
    let mut out = loss.mutable_gpu_data()?;
    let sums = scratch.sums.view(runs).expect("grown above");
    let counts = scratch.counts.view(runs).expect("grown above");
    let mut totals = scratch.totals.grown(gpu, 2).map_err(err)?;
    // SAFETY: sums and counts hold runs values, totals two, loss one.
    unsafe {
        loss_total_f32(
            gpu,
            launch_config(1),
            runs as i64,
            &sums,
            &counts,
            divisor,
            &mut totals,
            &mut write(&mut out, 1)?,
        )
    }
    .map_err(err)
}

/// EuclideanLoss's gradient `alpha (a - b)` into `into`'s diff.
pub(crate) fn euclidean_backward(
    gpu: &Gpu,
    alpha: f64,
    a: &Blob<f32>,
    b: &Blob<f32>,
    into: &Blob<f32>,
) -> Result<()> {
    let n = a.count();
    let (ag, bg, mut dg) = (a.gpu_data()?, b.gpu_data()?, into.mutable_gpu_diff()?);
    // SAFETY: a, b and into hold n values.
    unsafe {
        euclidean_backward_f32(
            gpu,
            launch_config(n),
            n as i64,
            alpha,
            &read(&ag, n)?,
            &read(&bg, n)?,
            &mut write(&mut dg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// SigmoidCrossEntropyLoss's gradient into `x`'s diff, divided by
/// `divisor` (by the forward pass's count of targets not ignored where 0).
pub(crate) fn sigmoid_cross_entropy_backward(
    gpu: &Gpu,
    scratch: &LossScratch,
    (x, t, ignore): (&Blob<f32>, &Blob<f32>, Option<i64>),
    weight: f64,
    divisor: f64,
) -> Result<()> {
    let n = x.count();
    let (has_ignore, label) = ignore_args(ignore)?;
    let totals = scratch.totals.view(2).ok_or_else(|| {
        crate::dyn_layer::bad_param(
            OP,
            "the backward pass ran before any forward pass on the GPU",
        )
    })?;
    let (xg, tg, mut dg) = (x.gpu_data()?, t.gpu_data()?, x.mutable_gpu_diff()?);
    // SAFETY: x, t and the diff hold n values, totals two.
    unsafe {
        sigmoid_cross_entropy_backward_f32(
            gpu,
            launch_config(n),
            n as i64,
            &read(&xg, n)?,
            &read(&tg, n)?,
            has_ignore,
            label,
            weight,
            divisor,
            &totals,
            &mut write(&mut dg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// ContrastiveLoss's gradient into `into`'s diff, `alpha` its similar
/// pairs' factor.
pub(crate) fn contrastive_backward(
    gpu: &Gpu,
    pairs: &Pairs<'_>,
    alpha: f64,
    into: &Blob<f32>,
) -> Result<()> {
    let (n, count) = (pairs.a.count(), pairs.y.count());
    let (ag, bg, yg) = (
        pairs.a.gpu_data()?,
        pairs.b.gpu_data()?,
        pairs.y.gpu_data()?,
    );
    let mut dg = into.mutable_gpu_diff()?;
    // SAFETY: a, b and into hold a `channels` row a pair, y a value.
    unsafe {
        contrastive_backward_f32(
            gpu,
            launch_config(count),
            count as i64,
            (n / count.max(1)) as i64,
            &read(&ag, n)?,
            &read(&bg, n)?,
            &read(&yg, count)?,
            pairs.margin,
            i32::from(pairs.legacy),
            alpha,
            &mut write(&mut dg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// The gradients of a loss of `a - b` (EuclideanLoss, ContrastiveLoss):
/// `write(alpha, into)` for each of the two inputs `down` asks for, alpha
/// `+weight / num` for the first and `-weight / num` for the second.
pub(crate) fn signed_gradients(
    bottoms: &[&Blob<f32>],
    weight: f64,
    down: &[bool],
    mut write: impl FnMut(f64, &Blob<f32>) -> Result<()>,
) -> Result<()> {
    for (i, sign) in [(0, 1.0), (1, -1.0)] {
        if down[i] {
            let items = bottoms[i].shape().first().copied().unwrap_or(1).max(1);
            write(sign * weight / items as f64, bottoms[i])?;
        }
    }
    Ok(())
}
