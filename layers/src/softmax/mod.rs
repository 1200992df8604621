//! Caffe's Softmax, SoftmaxWithLoss and Accuracy layers.

#[cfg(feature = "cuda")]
mod cuda;

use blob_kernels::cpu;
use blob_runtime::{Blob, MathElement};

use crate::layer::Result;
#[cfg(feature = "cuda")]
pub(crate) use cuda::SOFTMAX;
pub(crate) use loss::{AccuracyLayer, SoftmaxWithLossLayer};
pub(crate) use runtime::SoftmaxLayer;

mod loss;
mod runtime;

/// The fewest values [`softmax_rows`] shares among the cores: a few
/// tens of microseconds of work on one, past a helper's hand-over.
const PARALLEL_ROWS_MIN: usize = 1 << 14;

/// Softmax over each run of `classes` adjacent values, the rows cut
/// into one part a core where they are many ([`PARALLEL_ROWS_MIN`]):
/// MobileNet-SSD's `mbox_conf_softmax` (1,917 rows of 21) took 0.15 ms
/// on one core of two while ONNX Runtime took 0.05 on both.
fn softmax_rows<T: MathElement>(x: &[T], prob: &mut [T], classes: usize) {
    let rows = x.len() / classes;
    let (x, prob) = (&x[..rows * classes], &mut prob[..rows * classes]);
    let cores = cpu::cores();
    if cores < 2 || x.len() < PARALLEL_ROWS_MIN {
        return softmax_row_run(x, prob, classes);
    }
    let part = rows.div_ceil(cores) * classes;
    cpu::on_cores(x.chunks(part).zip(prob.chunks_mut(part)), |(x, prob)| {
        softmax_row_run(x, prob, classes)
    });
}

/// [`softmax_rows`] on one core: each row shifted by its largest value,
/// then `e^` of the whole run at once (`cpu::exp` vectorizes `f32`
/// across the rows, whatever their length: MobileNet-SSD's 1,917 rows of
/// 21 took 0.17 ms a value at a time), then each row scaled by its sum's
/// reciprocal. A row's largest value is taken in [`PARTIALS`]
/// interleaved chains (the same value, in any order): one chain of
/// compares a row waited on each step's latency. The sum stays one
/// chain in the row's order: summed in eight, LeNet's losses resumed
/// from Caffe's snapshot drifted past 1e-5 of Caffe's within 3
/// iterations.
fn softmax_row_run<T: MathElement>(x: &[T], prob: &mut [T], classes: usize) {
    for (row, out) in x.chunks_exact(classes).zip(prob.chunks_exact_mut(classes)) {
        let max = partial_folds(row, T::from_f64(f64::NEG_INFINITY), |a, b| {
            if b > a { b } else { a }
        });
        for (o, &v) in out.iter_mut().zip(row) {
            *o = v - max;
        }
    }
    cpu::exp_inplace(prob);
    for out in prob.chunks_exact_mut(classes) {
        let sum: T = out.iter().copied().sum();
        let scale = T::ONE / sum;
        for v in out.iter_mut() {
            *v = scale * *v;
        }
    }
}

/// Independent chains a row's largest value is taken in (an AVX2
/// register of `f32`).
const PARTIALS: usize = 8;

/// `values` folded by `f` from `start` as [`PARTIALS`] chains, value `i`
/// into chain `i % PARTIALS`, then the chains folded in order: the
/// chains run side by side, where one chain waits on each step.
#[inline(always)]
fn partial_folds<T: Copy>(values: &[T], start: T, f: impl Fn(T, T) -> T) -> T {
    let mut chains = [start; PARTIALS];
    let mut runs = values.chunks_exact(PARTIALS);
    for run in &mut runs {
        for (chain, &v) in chains.iter_mut().zip(run) {
            *chain = f(*chain, v);
        }
    }
    for (chain, &v) in chains.iter_mut().zip(runs.remainder()) {
        *chain = f(*chain, v);
    }
    chains.into_iter().fold(start, &f)
}

/// `prob = softmax(x)` over the `classes` values of each of `outer x
/// inner` positions (element `(o, c, i)` at `(o * classes + c) * inner +
/// i`), on the device `x` lives on; in place or not.
pub(crate) fn forward<T: MathElement>(
    x: &Blob<T>,
    prob: &Blob<T>,
    (outer, classes, inner): (usize, usize, usize),
) -> Result<()> {
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::gpu::gpu_of_all(&[x, prob]) {
        use crate::gpu::as_f32;
        return cuda::forward(&gpu, (outer, classes, inner), as_f32(x), as_f32(prob));
    }
    debug_assert_eq!(x.count(), outer * classes * inner);
    if std::ptr::eq(x, prob) {
        let input = x.to_vec()?;
        softmax_positions(&input, &mut prob.mutable_cpu_data()?, classes, inner);
    } else {
        softmax_positions(
            &x.cpu_data()?,
            &mut prob.mutable_cpu_data()?,
            classes,
            inner,
        );
    }
    Ok(())
}

/// `dx = p * (dp - sum(dp * p))` per position, as [`forward`].
pub(crate) fn backward<T: MathElement>(
    x: &Blob<T>,
    prob: &Blob<T>,
    (outer, classes, inner): (usize, usize, usize),
) -> Result<()> {
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::gpu::gpu_of_all(&[x, prob]) {
        use crate::gpu::as_f32;
        return cuda::backward(&gpu, (outer, classes, inner), as_f32(x), as_f32(prob));
    }
    debug_assert_eq!(x.count(), outer * classes * inner);
    let p = prob.to_vec()?;
    let dp = prob.diff_to_vec()?;
    let mut dx = x.mutable_cpu_diff()?;
    let block = classes * inner;
    for ((p, dp), dx) in p
        .chunks_exact(block)
        .zip(dp.chunks_exact(block))
        .zip(dx.chunks_exact_mut(block))
    {
        for i in 0..inner {
            let dot =
                (0..classes).fold(T::ZERO, |acc, c| acc + p[c * inner + i] * dp[c * inner + i]);
            for c in 0..classes {
                let at = c * inner + i;
                dx[at] = p[at] * (dp[at] - dot);
            }
        }
    }
    Ok(())
}

/// Softmax over strided classes (`inner` apart); rows when `inner` is 1.
/// Each block's positions are taken side by side, a class at a time, so
/// the largest values, the shifts, `e^` ([`softmax_rows`]) and the sums
/// each run along `inner` adjacent values.
fn softmax_positions<T: MathElement>(x: &[T], prob: &mut [T], classes: usize, inner: usize) {
    if classes == 0 || inner == 0 {
        return;
    }
    if inner == 1 {
        return softmax_rows(x, prob, classes);
    }
    let block = classes * inner;
    let mut per_position = vec![T::ZERO; inner];
    for (row, out) in x.chunks_exact(block).zip(prob.chunks_exact_mut(block)) {
        let largest = &mut per_position;
        largest.fill(T::from_f64(f64::NEG_INFINITY));
        for class in row.chunks_exact(inner) {
            for (m, &v) in largest.iter_mut().zip(class) {
                if v > *m {
                    *m = v;
                }
            }
        }
        for (o, v) in out.chunks_exact_mut(inner).zip(row.chunks_exact(inner)) {
            for ((o, &v), &m) in o.iter_mut().zip(v).zip(largest.iter()) {
                *o = v - m;
            }
        }
        cpu::exp_inplace(out);
        let sums = &mut per_position;
        sums.fill(T::ZERO);
        for class in out.chunks_exact(inner) {
            for (s, &e) in sums.iter_mut().zip(class) {
                *s += e;
            }
        }
        for s in sums.iter_mut() {
            *s = T::ONE / *s;
        }
        for class in out.chunks_exact_mut(inner) {
            for (o, &inv) in class.iter_mut().zip(sums.iter()) {
                *o *= inv;
            }
        }
    }
}

/// Makes `blob` a blob of `shape` on the device `like` lives on (the
/// host, if none), keeping it where it already is.
pub(crate) fn place_with<T: MathElement>(
    blob: &mut Blob<T>,
    like: &Blob<T>,
    shape: &[usize],
) -> Result<()> {
    let same_place = match (blob.device(), like.device()) {
        (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    };
    if !same_place {
        *blob = match like.device() {
            Some(device) => Blob::with_device(shape, device.clone())?,
            None => Blob::new(shape)?,
        };
    }
    // A default blob has no axes and no values; `shape` [] is one value.
    if blob.shape() != shape || blob.count() != shape.iter().product::<usize>() {
        blob.reshape(shape)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_in_partial_chains_give_each_rows_softmax() {
        // Rows shorter than, as long as and longer than the chains, with
        // a remainder or none; the largest value anywhere in the row.
        for classes in [1, 3, 8, 16, 21, 37] {
            let rows = 5;
            let x: Vec<f32> = (0..rows * classes)
                .map(|i| ((i * 7919) % 113) as f32 * 0.25 - 9.0)
                .collect();
            let mut prob = vec![f32::NAN; x.len()];
            softmax_row_run(&x, &mut prob, classes);
            for (r, (row, got)) in x.chunks(classes).zip(prob.chunks(classes)).enumerate() {
                let max = row
                    .iter()
                    .copied()
                    .fold(f64::NEG_INFINITY, |a, b| a.max(b as f64));
                let e: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for (c, (&g, w)) in got.iter().zip(e.iter().map(|v| v / sum)).enumerate() {
                    assert!(
                        (g as f64 - w).abs() <= 1e-6 * w.max(1e-3),
                        "{classes} classes, row {r}, class {c}: {g} against {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn partial_folds_take_every_value() {
        for len in 0..20 {
            let v: Vec<f64> = (0..len).map(|i| (i * i) as f64).collect();
            assert_eq!(partial_folds(&v, 0.0, |a, b| a + b), v.iter().sum::<f64>());
            let largest = partial_folds(&v, f64::NEG_INFINITY, f64::max);
            assert_eq!(largest, v.last().copied().unwrap_or(f64::NEG_INFINITY));
        }
    }
}
