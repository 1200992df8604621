//! The CPU side of Convolution: im2col, one gemm per round of images sized
//! to stay in cache, and col2im for the input gradient (Caffe's
//! `Forward_cpu` and `Backward_cpu`).

use blob_kernels::cpu::{self, Transpose};
use blob_runtime::MathElement;

use crate::layer::ensure;

/// A convolution's sizes for one input: batch, input and output planes,
/// kernel, stride and padding.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvGeometry {
    pub batch: usize,
    pub channels_in: usize,
    pub channels_out: usize,
    pub h: usize,
    pub w: usize,
    pub oh: usize,
    pub ow: usize,
    pub kernel: usize,
    pub stride: usize,
    pub pad: usize,
}

/// One run of `ow` column entries: where it starts in the column buffer,
/// the input row it reads (`None` for a row of padding), and the outputs
/// `q` in `valid` whose input pixel `row + q * stride + shift` is inside the
/// image (the others read padding).
struct Run {
    col: usize,
    row: Option<usize>,
    valid: std::ops::Range<usize>,
    shift: usize,
}

impl ConvGeometry {
    /// Caffe's output size: `(input + 2 pad - kernel) / stride + 1`.
    pub fn output_size(input: usize, kernel: usize, stride: usize, pad: usize) -> usize {
        (input + 2 * pad).saturating_sub(kernel) / stride + 1
    }

    /// The im2col patch length `channels_in * kernel * kernel`.
    pub fn patch(&self) -> usize {
        self.channels_in * self.kernel * self.kernel
    }

    /// Calls `run` for every run of images `first..first + count`; im2col
    /// and its inverse walk the same runs.
    fn for_each_run(&self, first: usize, count: usize, mut run: impl FnMut(Run)) {
        let Self {
            h,
            w,
            oh,
            ow,
            kernel: k,
            stride: s,
            pad,
            channels_in: cin,
            ..
        } = *self;
        let p = oh * ow;
        let cols = count * p;
        for c in 0..cin {
            for ki in 0..k {
                for kj in 0..k {
                    // Outputs q read input column q * s + kj - pad.
                    let lo = pad.saturating_sub(kj).div_ceil(s);
                    let hi = (w + pad).saturating_sub(kj).div_ceil(s).min(ow);
                    let valid = lo.min(hi)..hi;
                    let row0 = ((c * k + ki) * k + kj) * cols;
                    for img in 0..count {
                        let plane = ((first + img) * cin + c) * h * w;
                        for r in 0..oh {
                            let ih = (r * s + ki).checked_sub(pad).filter(|&ih| ih < h);
                            run(Run {
                                col: row0 + img * p + r * ow,
                                row: ih.map(|ih| plane + ih * w),
                                valid: valid.clone(),
                                // q * s + kj - pad, for q >= lo, never negative.
                                shift: kj,
                            });
                        }
                    }
                }
            }
        }
    }

    /// The input pixel of output column `q` in a run reading `row`.
    fn pixel(&self, row: usize, q: usize, shift: usize) -> usize {
        row + q * self.stride + shift - self.pad
    }

    /// im2col of images `first..first + count` of `x` into `col`: row
    /// `(c, ki, kj)`, column `(image, oh, ow)`; padding reads as zero.
    pub fn im2col<T: MathElement>(&self, x: &[T], first: usize, count: usize, col: &mut [T]) {
        let ow = self.ow;
        self.for_each_run(first, count, |run| {
            let dst = &mut col[run.col..run.col + ow];
            let Some(row) = run.row else {
                dst.fill(T::ZERO);
                return;
            };
            dst[..run.valid.start].fill(T::ZERO);
            dst[run.valid.end..].fill(T::ZERO);
            if self.stride == 1 && !run.valid.is_empty() {
                let from = self.pixel(row, run.valid.start, run.shift);
                dst[run.valid.clone()].copy_from_slice(&x[from..from + run.valid.len()]);
            } else {
                for q in run.valid {
                    dst[q] = x[self.pixel(row, q, run.shift)];
                }
            }
        });
    }

    /// The inverse of [`Self::im2col`]: adds each column entry back onto
    /// the input pixel it was copied from (padding takes nothing).
    pub fn col2im_add<T: MathElement>(&self, col: &[T], first: usize, count: usize, dx: &mut [T]) {
        self.for_each_run(first, count, |run| {
            let Some(row) = run.row else { return };
            for q in run.valid {
                dx[self.pixel(row, q, run.shift)] += col[run.col + q];
            }
        });
    }

    /// Images per im2col + gemm round: enough columns for gemm to run at
    /// speed, few enough that the column buffer stays in the core's cache
    /// (a whole-batch im2col of conv2 at batch 1000 is 128 MB and leaves
    /// gemm waiting on memory).
    fn images_per_round(&self) -> usize {
        const COLUMN_BUFFER_FLOATS: usize = 1 << 17;
        let per_image = (self.patch() * self.oh * self.ow).max(1);
        (COLUMN_BUFFER_FLOATS / per_image).clamp(1, self.batch.max(1))
    }
}

/// Reusable buffers of a convolution's CPU passes.
#[derive(Default)]
pub(crate) struct ConvScratch<T> {
    col: Vec<T>,
    tmp: Vec<T>,
    dcol: Vec<T>,
}

/// `y = conv(x) + bias`, `weight` `(cout, cin, k, k)`.
pub(crate) fn forward<T: MathElement>(
    g: &ConvGeometry,
    scratch: &mut ConvScratch<T>,
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
) {
    let (cout, p, ckk) = (g.channels_out, g.oh * g.ow, g.patch());
    let round = g.images_per_round();
    ensure(&mut scratch.col, ckk * round * p);
    ensure(&mut scratch.tmp, cout * round * p);
    for first in (0..g.batch).step_by(round) {
        let count = round.min(g.batch - first);
        let cols = count * p;
        g.im2col(x, first, count, &mut scratch.col);
        let tmp = &mut scratch.tmp[..cout * cols];
        cpu::gemm(
            Transpose::No,
            Transpose::No,
            cout,
            cols,
            ckk,
            T::ONE,
            weight,
            &scratch.col[..ckk * cols],
            T::ZERO,
            tmp,
        );
        // (cout, image, p) to (image, cout, p), adding the bias.
        for img in 0..count {
            for (co, &b) in bias.iter().enumerate() {
                let src = &tmp[co * cols + img * p..][..p];
                let dst = &mut y[((first + img) * cout + co) * p..][..p];
                for (d, &v) in dst.iter_mut().zip(src) {
                    *d = v + b;
                }
            }
        }
    }
}

/// The gradients a backward pass computes: weight and bias diffs
/// (accumulated), and the input diff (overwritten) when asked for.
pub(crate) struct ConvGradients<'a, T> {
    pub weight: &'a mut [T],
    pub bias: &'a mut [T],
    pub input: Option<&'a mut [T]>,
}

/// Caffe's `Backward_cpu`: recomputes the im2col of `x` rather than
/// keeping the forward pass's.
pub(crate) fn backward<T: MathElement>(
    g: &ConvGeometry,
    scratch: &mut ConvScratch<T>,
    x: &[T],
    weight: &[T],
    dy: &[T],
    grads: ConvGradients<'_, T>,
) {
    let (cout, p, ckk) = (g.channels_out, g.oh * g.ow, g.patch());
    let round = g.images_per_round();
    ensure(&mut scratch.col, ckk * round * p);
    ensure(&mut scratch.tmp, cout * round * p);
    let ConvGradients {
        weight: dw,
        bias: db,
        input: mut dx,
    } = grads;
    if let Some(dx) = dx.as_deref_mut() {
        ensure(&mut scratch.dcol, ckk * round * p);
        dx.fill(T::ZERO);
    }
    for first in (0..g.batch).step_by(round) {
        let count = round.min(g.batch - first);
        let cols = count * p;
        g.im2col(x, first, count, &mut scratch.col);
        let tmp = &mut scratch.tmp[..cout * cols];
        for img in 0..count {
            for (co, b) in db.iter_mut().enumerate() {
                let src = &dy[((first + img) * cout + co) * p..][..p];
                tmp[co * cols + img * p..][..p].copy_from_slice(src);
                *b += src.iter().copied().sum::<T>();
            }
        }
        cpu::gemm(
            Transpose::No,
            Transpose::Yes,
            cout,
            ckk,
            cols,
            T::ONE,
            tmp,
            &scratch.col[..ckk * cols],
            T::ONE,
            dw,
        );
        let Some(dx) = dx.as_deref_mut() else {
            continue;
        };
        // dcol = W^T dy, then col2im into x's diff.
        let dcol = &mut scratch.dcol[..ckk * cols];
        cpu::gemm(
            Transpose::Yes,
            Transpose::No,
            ckk,
            cols,
            cout,
            T::ONE,
            weight,
            tmp,
            T::ZERO,
            dcol,
        );
        g.col2im_add(dcol, first, count, dx);
    }
}
