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
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
#[cfg(target_arch = "x86_64")]
use std::ops::Range;

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

/// The planes row by row, each row a register of output columns at a
/// time, with the masks of each register's three runs of columns (the
/// last clipped by the row's end) made once for all the rows. Made a
/// row at a time, the masks and the pointers they needed spilled to the
/// stack, and O-Net's pool1 (32 planes of 46 x 46, a row two registers
/// of windows) spent more in that bookkeeping than in its comparisons.
/// One Zen 5 core (2026-12-05, medians of 3-5 alternating runs, in the
/// nets, ms, AVX-512 / AVX2): O-Net's pool1 0.0080 -> 0.0065 / 0.0071 ->
/// 0.0058, pool2 0.0051 -> 0.0034 / 0.0047 -> 0.0036, its pass 0.1230 ->
/// 0.1187 / 0.1608 -> 0.1534; R-Net's pass 0.0306 -> 0.0288 / 0.0429 ->
/// 0.0420; GoogLeNet's four 0.614 -> 0.423 / 0.302 -> 0.306.
/// A register at a time down all of a plane's rows ran AVX-512's
/// GoogLeNet pools 0.383 but AVX2's 0.357.
///
/// # Safety
/// `L`'s instructions are enabled; `x` and `y` hold `shape`'s planes,
/// which [`Stride2Pool::is_taken`] takes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn pool_planes<L: Lanes>(x: &[f32], shape: Stride2Pool, y: &mut [f32]) {
    let Stride2Pool {
        planes,
        input: [h, w],
        kernel: [kh, kw],
        output: [oh, ow],
    } = shape;
    // Rows of outputs whose windows hold all `kh` rows; Caffe's rounding
    // up clips the ones after.
    let whole_rows = if h >= kh {
        ((h - kh) / 2 + 1).min(oh)
    } else {
        0
    };
    let (x, y) = (x.as_ptr(), y.as_mut_ptr());
    let register = |q0: usize| {
        let first = 2 * q0;
        // SAFETY: the caller enabled `L`'s instructions.
        unsafe {
            Register::<L> {
                at: q0,
                columns: [first, first + L::N, first + 2 * L::N],
                keep: [
                    L::first(w.saturating_sub(first)),
                    L::first(w.saturating_sub(first + L::N)),
                    L::first(w.saturating_sub(first + 2 * L::N)),
                ],
                outputs: L::first(ow - q0),
            }
        }
    };
    let step = REGISTERS_AT_ONCE * L::N;
    for q in (0..ow).step_by(step) {
        let registers: [Register<L>; REGISTERS_AT_ONCE] =
            std::array::from_fn(|i| register((q + i * L::N).min(ow - 1)));
        let registers = &registers[..(ow - q).div_ceil(L::N).min(REGISTERS_AT_ONCE)];
        for p in 0..planes {
            let plane = x.wrapping_add(p * h * w);
            let outputs = y.wrapping_add(p * oh * ow);
            let top = |r: usize| plane.wrapping_add(2 * r * w);
            let out = |r: usize, q0: usize| outputs.wrapping_add(r * ow + q0);
            // SAFETY: the rows are inside the plane and the outputs
            // inside `y`; `L`'s instructions are enabled, per the caller.
            // The usual heights and widths unrolled.
            unsafe {
                match (kh, kw) {
                    (3, 3) => {
                        rows_of_windows::<L, 3, true>(top, 3, w, registers, out, 0..whole_rows)
                    }
                    (2, 2) => {
                        rows_of_windows::<L, 2, false>(top, 2, w, registers, out, 0..whole_rows)
                    }
                    (_, 3) => {
                        rows_of_windows::<L, 0, true>(top, kh, w, registers, out, 0..whole_rows)
                    }
                    _ => rows_of_windows::<L, 0, false>(top, kh, w, registers, out, 0..whole_rows),
                }
                // The clipped rows, each over the rows left.
                for r in whole_rows..oh {
                    let count = h - 2 * r;
                    if kw == 3 {
                        rows_of_windows::<L, 0, true>(top, count, w, registers, out, r..r + 1);
                    } else {
                        rows_of_windows::<L, 0, false>(top, count, w, registers, out, r..r + 1);
                    }
                }
            }
        }
    }
}

/// How many rows of outputs ahead [`rows_of_windows`] asks for the
/// input rows it will read: a plane from the layer before lies in L3,
/// and the hardware's prefetcher fetched it at half of what the cache
/// gives. One Zen 5 core (2026-12-05, medians of 3-5 alternating runs in
/// the nets, ms, AVX-512 / AVX2): SqueezeNet's pool1 (64 planes of 113 x
/// 113) 0.101 -> 0.072 (behind its conv1 alone 0.072 -> 0.059 / 0.064
/// level), GoogLeNet's four 3x3 pools 0.305 -> 0.188 / 0.248 -> 0.215
/// (AVX2's pool1 0.125 -> 0.080, its pool3 and pool4, planes of 28 and
/// 14, 0.007 and 0.004 slower), O-Net's pools 0.0110 -> 0.0102. One row
/// ahead ran the same.
const ROWS_AHEAD: usize = 2;

/// The registers of output columns whose masks [`pool_planes`] makes
/// before a pass over the planes' rows (a row 512 outputs wide on
/// AVX-512, 256 on AVX2; wider rows take several passes).
const REGISTERS_AT_ONCE: usize = 32;

/// One register of output columns: the first columns of its three runs
/// of input columns (the windows' left columns, the rest, and the next
/// register's first), the masks keeping each run inside the row, and the
/// mask of its outputs.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Register<L: Lanes> {
    at: usize,
    columns: [usize; 3],
    keep: [L::M; 3],
    outputs: L::M,
}

/// The windows of output rows `rows`, each over `count` input rows
/// (`ROWS`, where it is not 0) from `top(r)`, a register of output
/// columns at a time, into `out(r, first column)`; windows 3 wide where
/// `WIDE3`, else 2. The column maxima of a register read columns `2
/// q0..2 q0 + 2 N` and, for windows 3 wide, the first of the next.
///
/// # Safety
/// `L`'s instructions are enabled; the rows of `w` values from each
/// `top(r)` are readable, and the outputs at each `out(r, q0)` writable.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rows_of_windows<L: Lanes, const ROWS: usize, const WIDE3: bool>(
    top: impl Fn(usize) -> *const f32,
    count: usize,
    w: usize,
    registers: &[Register<L>],
    out: impl Fn(usize, usize) -> *mut f32,
    rows: Range<usize>,
) {
    for r in rows {
        let rows = (top(r), count);
        // The two input rows that output row r + ROWS_AHEAD adds to the
        // ones before it.
        let ahead = top(r + ROWS_AHEAD).wrapping_add(count.saturating_sub(2) * w);
        for line in (0..2 * w).step_by(16) {
            // SAFETY: a prefetch reads nothing.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line) as *const i8) };
        }
        for &Register {
            at,
            columns: [c0, c1, c2],
            keep: [k0, k1, k2],
            outputs,
        } in registers
        {
            // SAFETY: as the caller promises. (Functions, not closures:
            // one is compiled without `L`'s instructions.)
            unsafe {
                let lo = column_maxima::<L, ROWS>(rows, w, c0, k0);
                let hi = column_maxima::<L, ROWS>(rows, w, c1, k1);
                let even = L::even(lo, hi);
                let mut best = L::max(L::odd(lo, hi), even);
                if WIDE3 {
                    // Columns 2 q + 2: the even ones a window on.
                    let next = column_maxima::<L, ROWS>(rows, w, c2, k2);
                    best = L::max(L::shift_in(even, next), best);
                }
                L::store_masked(outputs, out(r, at), best);
            }
        }
    }
}

/// The largest value of each of columns `first..first + N` over the
/// rows (`ROWS`, or `rows.1` where it is 0) from `rows.0`, `w` apart,
/// from -FLT_MAX down the rows, each step keeping the value held unless
/// the new one is greater; -FLT_MAX for a column past the row, which
/// `keep` (the columns below `w`) leaves out.
///
/// # Safety
/// `L`'s instructions are enabled; the rows of `w` values are readable.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn column_maxima<L: Lanes, const ROWS: usize>(
    (top, count): (*const f32, usize),
    w: usize,
    first: usize,
    keep: L::M,
) -> L::V {
    let count = if ROWS > 0 { ROWS } else { count };
    // SAFETY: `L`'s instructions are enabled, per the caller; `keep`
    // keeps the columns inside the row, and a load of none reads nothing.
    unsafe {
        let neg = L::splat(f32::MIN);
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
        // planes, tall windows, one output, rows of several passes.
        for (planes, input, kernel) in [
            (3, [22, 22], [3, 3]),
            (2, [46, 46], [3, 3]),
            (2, [9, 9], [3, 3]),
            (1, [21, 70], [3, 3]),
            (2, [7, 9], [2, 2]),
            (1, [5, 33], [4, 2]),
            (1, [3, 3], [3, 3]),
            // Rows wider than the registers one pass over the rows takes.
            (2, [5, 1101], [3, 3]),
            (1, [4, 1030], [2, 2]),
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
