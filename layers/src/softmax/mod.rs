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
/// 21 took 0.17 ms a value at a time), then each row scaled.
fn softmax_row_run<T: MathElement>(x: &[T], prob: &mut [T], classes: usize) {
    for (row, out) in x.chunks_exact(classes).zip(prob.chunks_exact_mut(classes)) {
        let max =
            row.iter().copied().fold(
                T::from_f64(f64::NEG_INFINITY),
                |a, b| if b > a { b } else { a },
            );
        for (o, &v) in out.iter_mut().zip(row) {
            *o = v - max;
        }
    }
    cpu::exp_inplace(prob);
    for out in prob.chunks_exact_mut(classes) {
        let sum: T = out.iter().copied().sum();
        cpu::scal(T::ONE / sum, out);
    }
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
