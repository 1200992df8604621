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

fn softmax_rows<T: MathElement>(x: &[T], prob: &mut [T], classes: usize) {
    for (row, out) in x.chunks_exact(classes).zip(prob.chunks_exact_mut(classes)) {
        let max =
            row.iter().copied().fold(
                T::from_f64(f64::NEG_INFINITY),
                |a, b| if b > a { b } else { a },
            );
        for (o, &v) in out.iter_mut().zip(row) {
            *o = (v - max).exp();
        }
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
fn softmax_positions<T: MathElement>(x: &[T], prob: &mut [T], classes: usize, inner: usize) {
    if inner == 1 {
        return softmax_rows(x, prob, classes);
    }
    let block = classes * inner;
    for (row, out) in x.chunks_exact(block).zip(prob.chunks_exact_mut(block)) {
        for i in 0..inner {
            let max = (0..classes).fold(T::from_f64(f64::NEG_INFINITY), |a, c| {
                let b = row[c * inner + i];
                if b > a { b } else { a }
            });
            let mut sum = T::ZERO;
            for c in 0..classes {
                let e = (row[c * inner + i] - max).exp();
                out[c * inner + i] = e;
                sum += e;
            }
            let inv = T::ONE / sum;
            for c in 0..classes {
                out[c * inner + i] *= inv;
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
