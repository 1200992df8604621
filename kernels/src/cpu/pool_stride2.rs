//! MAX pooling at stride 2 over windows 2 or 3 wide, unpadded, on
//! AVX-512 and AVX2: MTCNN's 3x3 pools (R-Net's and O-Net's, whose last windows
//! are clipped by Caffe's rounding up), and 2x2 pools over odd planes.
//!
//! The general loop takes each output row in short pieces (the column
//! maxima, the windows a run at a time, the clipped ones one by one); on
//! MTCNN's small planes that bookkeeping cost more than the comparisons
//! (R-Net's pool1, 28 planes of 22 x 22, took 13 us; its conv1 9). Here
//! a row's column maxima are made a register at a time, and a register
//! of windows' maxima from them with one two-register permute per window
//! column.

#[cfg(target_arch = "x86_64")]
use super::lanes::{Lanes, on_lanes};
use super::{Isa, isa};

/// The shape [`max_pool_stride2`] pools: `planes` planes of
/// `input[0] x input[1]` into planes of `output[0] x output[1]`, windows
/// of `kernel` at stride 2 without padding.
///
/// ```
/// use blob_kernels::cpu::Stride2Pool;
/// // MTCNN R-Net's pool1: 28 channels of 22 x 22, 3x3 windows, 11 x 11
/// // outputs (Caffe rounds up; the last windows are clipped).
/// let pool1 = Stride2Pool { planes: 28, input: [22, 22], kernel: [3, 3], output: [11, 11] };
/// assert!(pool1.is_taken());
/// // Windows 1 wide are left to the general loop.
/// assert!(!Stride2Pool { kernel: [3, 1], ..pool1 }.is_taken());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stride2Pool {
    /// Planes (images times channels).
    pub planes: usize,
    /// Input height and width.
    pub input: [usize; 2],
    /// Window height and width.
    pub kernel: [usize; 2],
    /// Output height and width.
    pub output: [usize; 2],
}

impl Stride2Pool {
    /// Whether [`max_pool_stride2`] takes this shape: a window 2 or 3
    /// wide and at least 2 high (so every window starts inside the input,
    /// as Caffe's rounding leaves them), and every output's window
    /// starting inside the input.
    pub fn is_taken(&self) -> bool {
        let [h, w] = self.input;
        let [kh, kw] = self.kernel;
        let [oh, ow] = self.output;
        (2..=3).contains(&kw) && kh >= 2 && oh > 0 && ow > 0 && 2 * (oh - 1) < h && 2 * (ow - 1) < w
    }
}

/// `y[p][r][q]` = the largest value of plane `p` of `x` in rows `2r ..
/// 2r + kernel[0]` and columns `2q .. 2q + kernel[1]`, each clipped to
/// the plane (Caffe's MAX pooling at stride 2, no padding), on AVX-512.
/// The comparisons are a general MAX pooling's, in its order: each
/// column's largest from -FLT_MAX down the window's rows, then across the
/// window's columns left to right, each step keeping the value held
/// unless the new one is greater (so a NaN never wins, and the bits are
/// the general loop's). Says whether it ran (`false`: neither AVX-512
/// nor AVX2, or a shape [`Stride2Pool::is_taken`] refuses; nothing was
/// written).
///
/// ```
/// use blob_kernels::cpu::{Stride2Pool, max_pool_stride2};
/// // One 3 x 5 plane, 3x3 windows: outputs at columns 0 and 2 (clipped).
/// let x = [1.0f32, 2.0, 3.0, 4.0, 5.0,
///          6.0, 0.0, 0.0, 0.0, 0.0,
///          0.0, 0.0, 9.0, 0.0, -1.0];
/// let shape = Stride2Pool { planes: 1, input: [3, 5], kernel: [3, 3], output: [1, 2] };
/// let mut y = [0.0f32; 2];
/// if max_pool_stride2(&x, shape, &mut y) {
///     assert_eq!(y, [9.0, 9.0]);
/// }
/// ```
///
/// # Panics
/// If `x` or `y` is shorter than its planes.
pub fn max_pool_stride2(x: &[f32], shape: Stride2Pool, y: &mut [f32]) -> bool {
    let Stride2Pool {
        planes,
        input: [h, w],
        output: [oh, ow],
        ..
    } = shape;
    assert!(
        x.len() >= planes * h * w && y.len() >= planes * oh * ow,
        "max_pool_stride2: {planes} planes of {h} x {w} into {oh} x {ow} need {} and {} values, got {} and {}",
        planes * h * w,
        planes * oh * ow,
        x.len(),
        y.len()
    );
    if isa() < Isa::Avx2 || !shape.is_taken() {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        on_lanes!(|L| {
            // SAFETY: the assert put every plane inside `x` and `y`.
            unsafe { pool_planes::<L>(x, shape, y) }
        })
        .is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// # Safety
/// `L`'s instructions are enabled; `x` and `y` hold `shape`'s planes,
/// which [`Stride2Pool::is_taken`] takes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn pool_planes<L: Lanes>(x: &[f32], shape: Stride2Pool, y: &mut [f32]) {
    let Stride2Pool {
        planes,
        input: [h, w],
        kernel: [kh, _],
        output: [oh, _],
    } = shape;
    let (x, y) = (x.as_ptr(), y.as_mut_ptr());
    for p in 0..planes {
        let plane = x.wrapping_add(p * h * w);
        for r in 0..oh {
            let top = plane.wrapping_add(2 * r * w);
            let out = y.wrapping_add((p * oh + r) * shape.output[1]);
            // SAFETY: the rows are inside the plane and the row of
            // outputs inside `y`; `L`'s instructions are enabled, per the
            // caller. The usual heights unrolled.
            unsafe {
                match (2 * r + kh).min(h) - 2 * r {
                    3 => row_of_windows::<L, 3>(top, 3, shape, out),
                    2 => row_of_windows::<L, 2>(top, 2, shape, out),
                    count => row_of_windows::<L, 0>(top, count, shape, out),
                }
            }
        }
    }
}

/// One row of outputs: windows over the `count` rows from `top` (`ROWS`
/// of them, where it is not 0), into `out`. The column maxima stay in
/// registers, each made once: a register of windows reads columns
/// `2 q0..2 q0 + 2 N` and the first of the next, which begins the next
/// register's.
///
/// # Safety
/// `L`'s instructions are enabled; the rows of `shape`'s width from
/// `top` are readable, and its row of outputs at `out` writable.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn row_of_windows<L: Lanes, const ROWS: usize>(
    top: *const f32,
    count: usize,
    shape: Stride2Pool,
    out: *mut f32,
) {
    let ([_, w], [_, kw], [_, ow]) = (shape.input, shape.kernel, shape.output);
    let rows = (top, if ROWS > 0 { ROWS } else { count });
    // SAFETY: as the caller promises. (Functions, not closures: one is
    // compiled without `L`'s instructions.)
    unsafe {
        let mut lo = column_maxima::<L, ROWS>(rows, w, 0);
        for q0 in (0..ow).step_by(L::N) {
            let first = 2 * q0;
            let hi = column_maxima::<L, ROWS>(rows, w, first + L::N);
            let next = column_maxima::<L, ROWS>(rows, w, first + 2 * L::N);
            let even = L::even(lo, hi);
            let mut best = L::max(L::odd(lo, hi), even);
            if kw == 3 {
                // Columns 2 q + 2: the even ones a window on.
                best = L::max(L::shift_in(even, next), best);
            }
            L::store_masked(L::first(ow - q0), out.add(q0), best);
            lo = next;
        }
    }
}

/// The largest value of each of columns `first..first + N` over the
/// rows (`ROWS`, or `rows.1` where it is 0) from `rows.0`, `w` apart,
/// from -FLT_MAX down the rows, each step keeping the value held unless
/// the new one is greater; -FLT_MAX for a column past the row.
///
/// # Safety
/// `L`'s instructions are enabled; the rows of `w` values are readable.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn column_maxima<L: Lanes, const ROWS: usize>(
    (top, count): (*const f32, usize),
    w: usize,
    first: usize,
) -> L::V {
    let count = if ROWS > 0 { ROWS } else { count };
    // SAFETY: `L`'s instructions are enabled, per the caller; the mask
    // keeps the columns inside the row, and a load of none reads nothing.
    unsafe {
        let neg = L::splat(f32::MIN);
        let keep = L::first(w.saturating_sub(first));
        let mut m = neg;
        for row in 0..count {
            let v = L::load_masked_or(keep, neg, top.wrapping_add(row * w + first));
            m = L::max(v, m);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general loop's arithmetic: column maxima from -FLT_MAX, then the
    /// window left to right, the held value kept unless the new is greater.
    fn by_definition(x: &[f32], shape: Stride2Pool) -> Vec<f32> {
        let Stride2Pool {
            planes,
            input: [h, w],
            kernel: [kh, kw],
            output: [oh, ow],
        } = shape;
        let larger = |m: f32, v: f32| if v > m { v } else { m };
        let mut y = Vec::new();
        for p in 0..planes {
            for r in 0..oh {
                let mut columns = vec![f32::MIN; w];
                for row in 2 * r..(2 * r + kh).min(h) {
                    for (c, m) in columns.iter_mut().enumerate() {
                        *m = larger(*m, x[(p * h + row) * w + c]);
                    }
                }
                for q in 0..ow {
                    let (w0, w1) = (2 * q, (2 * q + kw).min(w));
                    y.push(
                        columns[w0 + 1..w1]
                            .iter()
                            .fold(columns[w0], |m, &v| larger(m, v)),
                    );
                }
            }
        }
        y
    }

    #[test]
    fn windows_clipped_or_whole_give_the_general_loops_bits() {
        // MTCNN R-Net's and O-Net's 3x3 pools (rounded up: the last
        // windows clipped), a plane wider than two registers, 2x2 over odd
        // planes, tall windows, one output.
        for (planes, input, kernel) in [
            (3, [22, 22], [3, 3]),
            (2, [46, 46], [3, 3]),
            (2, [9, 9], [3, 3]),
            (1, [21, 70], [3, 3]),
            (2, [7, 9], [2, 2]),
            (1, [5, 33], [4, 2]),
            (1, [3, 3], [3, 3]),
        ] {
            let [h, w] = input;
            let out = |n: usize, k: usize| (n - k).div_ceil(2) + 1;
            let output = [out(h, kernel[0]), out(w, kernel[1])];
            let shape = Stride2Pool {
                planes,
                input,
                kernel,
                output,
            };
            assert!(shape.is_taken(), "{shape:?}");
            // NaNs, signed zeros, infinities and ties among the values.
            let x: Vec<f32> = (0..planes * h * w)
                .map(|i| match i % 23 {
                    0 => f32::NAN,
                    5 => -0.0,
                    6 => 0.0,
                    11 => f32::NEG_INFINITY,
                    _ => ((i * 7919 % 101) as f32 - 50.0) / 8.0,
                })
                .collect();
            let want = by_definition(&x, shape);
            let mut got = vec![f32::NAN; want.len() + 3];
            if !max_pool_stride2(&x, shape, &mut got) {
                assert_eq!(isa(), Isa::Baseline);
                continue;
            }
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got[..want.len()]), bits(&want), "{shape:?}");
            assert!(got[want.len()..].iter().all(|v| v.is_nan()), "{shape:?}");
        }
    }

    #[test]
    fn shapes_with_windows_past_the_input_are_left_to_the_general_loop() {
        // Windows 1 wide at stride 2: the last of 3 outputs over 4 columns
        // would start past the input.
        let shape = Stride2Pool {
            planes: 1,
            input: [4, 4],
            kernel: [2, 1],
            output: [2, 3],
        };
        assert!(!shape.is_taken());
        assert!(!max_pool_stride2(&[0.0; 16], shape, &mut [7.0; 6]));
    }
}
