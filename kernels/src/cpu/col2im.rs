//! Caffe's `col2im` for dense windows (stride 1, no padding or dilation),
//! on AVX-512: a convolution's input gradient from its column gradient.
//!
//! Added run by run, each column row's runs of `ow` values land on input
//! rows one tap to the right of the last, so each 8-value add reloads
//! what the previous tap's store has just written (LeNet's conv2 added
//! 3 values a nanosecond). Here each input row is summed in registers,
//! tap after tap, from masked loads of the column rows, and written once:
//! no zeroing beforehand and no read of the gradient being built.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::{Isa, isa};

/// The shape of a dense window's column buffer: `channels` planes of
/// `h x w` pixels, a `kh x kw` window at stride 1 with no padding, so
/// `(h - kh + 1) x (w - kw + 1)` outputs a plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseWindow {
    /// Input planes (channels).
    pub channels: usize,
    /// Input height and width.
    pub input: [usize; 2],
    /// Window height and width.
    pub kernel: [usize; 2],
}

impl DenseWindow {
    /// Output height and width; `None` where the window is larger than
    /// the input or empty.
    pub fn output(&self) -> Option<[usize; 2]> {
        let [h, w] = self.input;
        let [kh, kw] = self.kernel;
        if kh == 0 || kw == 0 || kh > h || kw > w {
            return None;
        }
        Some([h - kh + 1, w - kw + 1])
    }
}

/// Writes into `dx` (`images` images of `channels x h x w`) the sum, for
/// each pixel, of the column entries copied from it (Caffe `col2im_cpu`
/// with stride 1 and no padding, into a zeroed image). `col` holds one
/// row per tap `(channel, ki, kj)`, each row the `images` images' outputs
/// side by side (`images * oh * ow` values, as im2col writes a round of
/// images). Each pixel adds its taps in `(ki, kj)` order from zero, as the
/// run-by-run loop does, so the bits are the same. Says whether it ran
/// (`false`: no AVX-512, and nothing was written).
///
/// ```
/// use blob_kernels::cpu::{DenseWindow, col2im_dense};
/// // One 1x3 image, a 1x2 window: two outputs, two taps.
/// let window = DenseWindow { channels: 1, input: [1, 3], kernel: [1, 2] };
/// let col = [1.0f32, 2.0, /* tap kj = 1: */ 10.0, 20.0];
/// let mut dx = [f32::NAN; 3];
/// if col2im_dense(&col, window, 1, &mut dx) {
///     assert_eq!(dx, [1.0, 12.0, 20.0]);
/// }
/// ```
///
/// # Panics
/// If `col` or `dx` is shorter than the images need.
pub fn col2im_dense(col: &[f32], window: DenseWindow, images: usize, dx: &mut [f32]) -> bool {
    let DenseWindow {
        channels,
        input: [h, w],
        kernel: [kh, kw],
    } = window;
    // A window larger than its input (or empty) has no outputs: nothing
    // is copied from any pixel, so each sums to zero.
    let [oh, ow] = window.output().unwrap_or([0, 0]);
    let col_len = channels * kh * kw * images * oh * ow;
    let dx_len = images * channels * h * w;
    assert!(
        col.len() >= col_len && dx.len() >= dx_len,
        "col2im_dense: {images} image(s) need a column buffer of {col_len} and an input of {dx_len} values, got {} and {}",
        col.len(),
        dx.len()
    );
    if isa() != Isa::Avx512 {
        return false;
    }
    if oh == 0 {
        dx[..dx_len].fill(0.0);
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `isa` found AVX-512 F; the assert put every row read inside
    // `col` and every row written inside `dx`.
    unsafe {
        dense_avx512(col, window, images, dx)
    };
    #[cfg(target_arch = "x86_64")]
    return true;
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Lanes `lo..hi` of a 16-lane mask, clipped to the register.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn lanes(lo: isize, hi: isize) -> __mmask16 {
    let (lo, hi) = (lo.clamp(0, 16) as u32, hi.clamp(0, 16) as u32);
    if lo >= hi {
        return 0;
    }
    (((1u32 << (hi - lo)) - 1) << lo) as __mmask16
}

/// # Safety
/// AVX-512 F is available; `col` and `dx` hold what [`col2im_dense`]
/// asserts.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dense_avx512(col: &[f32], window: DenseWindow, images: usize, dx: &mut [f32]) {
    let DenseWindow {
        channels,
        input: [h, _],
        ..
    } = window;
    let (col, dx) = (col.as_ptr(), dx.as_mut_ptr());
    // Channels a pass sums side by side: each row's sum is a chain of
    // kh * kw dependent adds (25 for LeNet's conv2), so one row at a time
    // waits on the adder's latency; rows of different channels do not
    // depend on each other.
    const CHANNELS: usize = 4;
    let whole = channels - channels % CHANNELS;
    for img in 0..images {
        for y in 0..h {
            for c0 in (0..whole).step_by(CHANNELS) {
                // SAFETY: as the caller promises; channels c0..c0 + 4 exist.
                unsafe { row_sums::<CHANNELS>(col, (window, images), (img, y, c0), dx) };
            }
            for c in whole..channels {
                // SAFETY: as above, channel c exists.
                unsafe { row_sums::<1>(col, (window, images), (img, y, c), dx) };
            }
        }
    }
}

/// Row `y` of channels `c0..c0 + N` of image `img` of `images`: each
/// pixel the sum of its column entries, in the order of the taps (`ki`,
/// then `kj`), 16 pixels a register.
///
/// # Safety
/// AVX-512 F is available; `col` and `dx` hold what [`col2im_dense`]
/// asserts for `window` and `images`, and channels `c0..c0 + N` exist.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn row_sums<const N: usize>(
    col: *const f32,
    (window, images): (DenseWindow, usize),
    (img, y, c0): (usize, usize, usize),
    dx: *mut f32,
) {
    let Some([oh, ow]) = window.output() else {
        return;
    };
    let DenseWindow {
        channels,
        input: [h, w],
        kernel: [kh, kw],
    } = window;
    let (plane, row_len) = (oh * ow, images * oh * ow);
    // Taps ki with an output row y - ki inside the plane.
    let ki_range = y.saturating_sub(oh - 1)..(y + 1).min(kh);
    for x0 in (0..w).step_by(16) {
        let mut sums = [_mm512_setzero_ps(); N];
        for ki in ki_range.clone() {
            let run = img * plane + (y - ki) * ow;
            for kj in 0..kw {
                // Lane l is pixel x0 + l, output x0 + l - kj of the run.
                let first = kj as isize - x0 as isize;
                let mask = lanes(first, first + ow as isize);
                for (u, sum) in sums.iter_mut().enumerate() {
                    let row = ((c0 + u) * kh + ki) * kw;
                    // Masked-off lanes are not read, so the start may lie
                    // before the row.
                    let from = col
                        .wrapping_add((row + kj) * row_len + run + x0)
                        .wrapping_sub(kj);
                    // SAFETY: every unmasked lane is output `x0 + l - kj <
                    // ow` of this run, inside `col`.
                    let v = unsafe { _mm512_maskz_loadu_ps(mask, from) };
                    *sum = _mm512_add_ps(*sum, v);
                }
            }
        }
        let keep = lanes(0, (w - x0) as isize);
        for (u, sum) in sums.iter().enumerate() {
            let row = ((img * channels + c0 + u) * h + y) * w;
            // SAFETY: the kept lanes are pixels `x0..w` of the row, inside
            // `dx`.
            unsafe { _mm512_mask_storeu_ps(dx.add(row + x0), keep, *sum) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, run by run into a zeroed image, in the order the
    /// kernel promises: each pixel's taps by `(ki, kj)`.
    fn by_runs(col: &[f32], window: DenseWindow, images: usize) -> Vec<f32> {
        let [oh, ow] = window.output().unwrap();
        let DenseWindow {
            channels,
            input: [h, w],
            kernel: [kh, kw],
        } = window;
        let row_len = images * oh * ow;
        let mut dx = vec![0.0f32; images * channels * h * w];
        for c in 0..channels {
            for ki in 0..kh {
                for kj in 0..kw {
                    let row = &col[((c * kh + ki) * kw + kj) * row_len..][..row_len];
                    for img in 0..images {
                        for y in 0..oh {
                            for x in 0..ow {
                                dx[((img * channels + c) * h + y + ki) * w + x + kj] +=
                                    row[(img * oh + y) * ow + x];
                            }
                        }
                    }
                }
            }
        }
        dx
    }

    #[test]
    fn rows_summed_in_registers_give_the_run_by_run_bits() {
        // LeNet's conv2 round; rows wider than a register with a window
        // straddling the 16-lane segments; a window as large as its
        // input; a one-pixel window; tall and wide windows; a window
        // wider than a register, whose taps move runs 16 lanes and more.
        for (channels, input, kernel, images) in [
            (20, [12, 12], [5, 5], 4),
            (3, [9, 40], [3, 7], 2),
            (2, [5, 17], [5, 17], 3),
            (4, [6, 33], [1, 1], 1),
            (1, [20, 3], [7, 2], 2),
            (2, [3, 45], [2, 21], 2),
        ] {
            let window = DenseWindow {
                channels,
                input,
                kernel,
            };
            let [oh, ow] = window.output().unwrap();
            let len = channels * kernel[0] * kernel[1] * images * oh * ow;
            // Values of every magnitude, so that the order of the adds
            // shows in the bits.
            let col: Vec<f32> = (0..len)
                .map(|i| ((i * 7919 % 1009) as f32 - 504.0) * 10f32.powi((i % 7) as i32 - 3))
                .collect();
            let want = by_runs(&col, window, images);
            // Past the images, the buffer is not touched.
            let mut got = vec![f32::NAN; want.len() + 5];
            let ran = col2im_dense(&col, window, images, &mut got);
            assert_eq!(ran, isa() == Isa::Avx512, "{window:?}");
            if ran {
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got[..want.len()]), bits(&want), "{window:?}");
                assert!(got[want.len()..].iter().all(|v| v.is_nan()), "{window:?}");
            }
        }
    }

    #[test]
    fn a_window_larger_than_its_input_gives_zeros() {
        let window = DenseWindow {
            channels: 2,
            input: [3, 4],
            kernel: [4, 2],
        };
        let mut dx = [f32::NAN; 24];
        if col2im_dense(&[], window, 1, &mut dx) {
            assert_eq!(dx, [0.0; 24]);
        }
    }

    #[test]
    #[should_panic(expected = "need a column buffer of")]
    fn a_short_column_buffer_is_refused() {
        let window = DenseWindow {
            channels: 2,
            input: [4, 4],
            kernel: [3, 3],
        };
        col2im_dense(&[0.0; 10], window, 1, &mut [0.0; 32]);
    }
}
