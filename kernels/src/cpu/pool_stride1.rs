//! MAX pooling at stride 1, padded or not, on AVX-512 and AVX2:
//! GoogLeNet's 3x3
//! pools inside its inception blocks (480-832 planes of 14 x 14 or 28 x
//! 28, padding 1).
//!
//! The general loop's pieces of a row (the column maxima over 14 values,
//! the whole windows, the clipped ones at each edge one by one) cost 2.3
//! ns an output on those planes, 10% of GoogLeNet's pass. Here a row's
//! column maxima are made a register at a time. Where the row and its
//! padding fit two registers (planes up to 30 wide on AVX-512, 14 on
//! AVX2, padded by 1), the windows' maxima come from them shifted a
//! window column at a time by lane shifts: 0.21 -> 0.04 ms for 480
//! planes of 14 x 14, 0.12 -> 0.075 for 480 of 28 x 28 (AVX-512).
//! Wider rows go through a buffer whose padding columns hold
//! -FLT_MAX (Caffe's start), every row's column maxima before any window's, since loads
//! across the stores just made wait for them (1 ns an output row by row,
//! 0.33 ns so).

#[cfg(target_arch = "x86_64")]
use super::lanes::{Lanes, on_lanes};
use super::{Isa, isa};

/// The shape [`max_pool_stride1`] pools: `planes` planes of `input[0] x
/// input[1]` into planes of `output[0] x output[1]`, windows of `kernel`
/// at stride 1 with `pad` rows and columns of padding on each side.
///
/// ```
/// use blob_kernels::cpu::Stride1Pool;
/// // GoogLeNet's inception_4a/pool: 480 channels of 14 x 14, 3x3, pad 1.
/// let pool = Stride1Pool { planes: 480, input: [14, 14], kernel: [3, 3], pad: [1, 1], output: [14, 14] };
/// assert!(pool.is_taken());
/// // Padding as wide as the window leaves windows with no input.
/// assert!(!Stride1Pool { pad: [3, 3], output: [18, 18], ..pool }.is_taken());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stride1Pool {
    /// Planes (images times channels).
    pub planes: usize,
    /// Input height and width.
    pub input: [usize; 2],
    /// Window height and width.
    pub kernel: [usize; 2],
    /// Padding rows (top and bottom) and columns (left and right).
    pub pad: [usize; 2],
    /// Output height and width.
    pub output: [usize; 2],
}

impl Stride1Pool {
    /// Whether [`max_pool_stride1`] takes this shape: every output's
    /// window holds at least one input value (padding narrower than the
    /// window, no output starting past the input), and a nonempty input.
    pub fn is_taken(&self) -> bool {
        let ([h, w], [kh, kw], [ph, pw], [oh, ow]) =
            (self.input, self.kernel, self.pad, self.output);
        h > 0
            && w > 0
            && oh > 0
            && ow > 0
            && kh > ph
            && kw > pw
            && oh - 1 < h + ph
            && ow - 1 < w + pw
    }
}

/// `y[p][r][q]` = the largest value of plane `p` of `x` in rows `r - pad[0]
/// .. r - pad[0] + kernel[0]` and columns `q - pad[1] .. q - pad[1] +
/// kernel[1]`, each clipped to the plane (Caffe's MAX pooling at stride
/// 1), on AVX-512 or AVX2. The comparisons are a general MAX pooling's, in its
/// order: each column's largest from -FLT_MAX down the window's rows, then
/// across the window's columns left to right, each step keeping the value
/// held unless the new one is greater (so a NaN never wins, and the bits
/// are the general loop's). Says whether it ran (`false`: neither of those, or
/// a shape [`Stride1Pool::is_taken`] refuses; nothing was written).
///
/// ```
/// use blob_kernels::cpu::{Stride1Pool, max_pool_stride1};
/// // One 2 x 3 plane, 3x3 windows padded by 1: each output the largest
/// // of its neighbourhood.
/// let x = [1.0f32, 5.0, 2.0,
///          0.0, 3.0, 9.0];
/// let shape = Stride1Pool { planes: 1, input: [2, 3], kernel: [3, 3], pad: [1, 1], output: [2, 3] };
/// let mut y = [0.0f32; 6];
/// if max_pool_stride1(&x, shape, &mut y) {
///     assert_eq!(y, [5.0, 9.0, 9.0, 5.0, 9.0, 9.0]);
/// }
/// ```
///
/// # Panics
/// If `x` or `y` is shorter than its planes.
#[track_caller]
pub fn max_pool_stride1(x: &[f32], shape: Stride1Pool, y: &mut [f32]) -> bool {
    let Stride1Pool {
        planes,
        input: [h, w],
        output: [oh, ow],
        ..
    } = shape;
    assert!(
        x.len() >= planes * h * w && y.len() >= planes * oh * ow,
        "max_pool_stride1: {planes} planes of {h} x {w} into {oh} x {ow} need {} and {} values, got {} and {}",
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
        // Each output row's column maxima after `pad[1]` columns of -FLT_MAX,
        // and -FLT_MAX to the furthest value the row's last 16 windows read.
        let [_, kw] = shape.kernel;
        let [_, pw] = shape.pad;
        let narrow = on_lanes!(|L| {
            if pw + w <= 2 * L::N && ow <= 2 * L::N {
                let (x, y) = (x.as_ptr(), y.as_mut_ptr());
                // SAFETY: the assert put every plane inside `x` and `y`;
                // the padded row and the outputs fit two registers (one
                // where `TWO` is false).
                unsafe {
                    if pw + w > L::N || ow > L::N {
                        narrow_planes::<L, true>(x, shape, y)
                    } else {
                        narrow_planes::<L, false>(x, shape, y)
                    }
                };
                true
            } else {
                false
            }
        });
        if narrow == Some(true) {
            return true;
        }
        let row = (pw + w).max(ow + kw) + 16;
        let mut columns = vec![f32::MIN; oh * row];
        on_lanes!(|L| {
            // SAFETY: the assert put every plane inside `x` and `y`;
            // `columns` holds what the kernel reads and writes.
            unsafe { pool_planes::<L>(x, shape, y, (&mut columns, row)) }
        })
        .is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// # Safety
/// `L`'s instructions are enabled; `x` and `y` hold `shape`'s planes,
/// which [`Stride1Pool::is_taken`] takes; `columns` holds `output[0]`
/// rows of `row` values, all -FLT_MAX, `row` at least `pad[1] + w` and
/// `output[1] + kernel[1]`, plus 16.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn pool_planes<L: Lanes>(
    x: &[f32],
    shape: Stride1Pool,
    y: &mut [f32],
    (columns, row_len): (&mut [f32], usize),
) {
    let Stride1Pool {
        planes,
        input: [h, w],
        kernel: [kh, kw],
        pad: [ph, pw],
        output: [oh, ow],
    } = shape;
    let (x, y) = (x.as_ptr(), y.as_mut_ptr());
    // Column c of output row r's maxima at r * row_len + pw + c; the
    // padding columns stay -FLT_MAX.
    let maxima = columns.as_mut_ptr().wrapping_add(pw);
    let columns = columns.as_ptr();
    for p in 0..planes {
        let plane = x.wrapping_add(p * h * w);
        for r in 0..oh {
            let maxima = maxima.wrapping_add(r * row_len);
            // The window's rows, clipped to the plane (never empty, as
            // `is_taken` found).
            let rows = r.saturating_sub(ph)..(r + kh - ph).min(h);
            for x0 in (0..w).step_by(L::N) {
                // SAFETY: the kept columns of the rows are inside the
                // plane, and inside the w columns after the padding; `L`'s
                // instructions are enabled, per the caller.
                unsafe {
                    let keep = L::first(w - x0);
                    let m = column_maxima::<L>(plane, w, rows.clone(), x0, keep);
                    L::store_masked(keep, maxima.add(x0), m);
                }
            }
        }
        for r in 0..oh {
            let columns = columns.wrapping_add(r * row_len);
            for q0 in (0..ow).step_by(L::N) {
                // SAFETY: window column j of outputs q0..q0 + N reads
                // columns q0 + j .. q0 + j + N <= ow + kw + 15 of the
                // row, inside it; `L`'s instructions are enabled, per the
                // caller. (No closure for the loads: one is compiled
                // without them.)
                let best = unsafe {
                    let mut best = L::load(columns.add(q0));
                    for j in 1..kw {
                        best = L::max(L::load(columns.add(q0 + j)), best);
                    }
                    best
                };
                let out = y.wrapping_add((p * oh + r) * ow + q0);
                // SAFETY: the kept lanes are outputs q0.. of the row.
                unsafe { L::store_masked(L::first(ow - q0), out, best) };
            }
        }
    }
}

/// The column maxima of a window's rows from `rows` of `plane` (rows `w`
/// long), columns `x0..` (a register, or those of `keep`), from -FLT_MAX.
///
/// # Safety
/// `L`'s instructions are enabled; the kept columns of those rows are
/// inside the plane.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn column_maxima<L: Lanes>(
    plane: *const f32,
    w: usize,
    rows: std::ops::Range<usize>,
    x0: usize,
    keep: L::M,
) -> L::V {
    // SAFETY: the caller has `L`.
    let neg = unsafe { L::splat(f32::MIN) };
    let mut m = neg;
    for row in rows {
        // SAFETY: the kept lanes are inside the plane; the others read
        // nothing.
        unsafe {
            let v = L::load_masked_or(keep, neg, plane.add(row * w + x0));
            m = L::max(v, m);
        }
    }
    m
}

/// [`pool_planes`] for rows that fit two registers of `L`, padding
/// included, whose outputs fit two too (GoogLeNet's 28 x 28, 14 x 14
/// and 7 x 7 planes on AVX-512, its 14 x 14 and 7 x 7 ones on AVX2):
/// the row's column maxima are moved past the padding and shifted by a
/// window column at a time with lane shifts, never through memory. On
/// AVX2, GoogLeNet's inception pools in the net (one Zen 4 core,
/// 2026-12-06, alternating runs, ms) 14 x 14 0.074-0.076 -> 0.051-0.060,
/// 7 x 7 0.043-0.044 -> 0.033-0.038, through the column buffer before;
/// on AVX-512 no slower than the lane permutes of two registers it
/// replaced (4a 0.031-0.039 -> 0.024-0.025).
///
/// # Safety
/// `L`'s instructions are enabled; as [`pool_planes`], with `pad[1] + w`
/// and `output[1]` at most `2 N` (at most `N` unless `TWO`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn narrow_planes<L: Lanes, const TWO: bool>(x: *const f32, shape: Stride1Pool, y: *mut f32) {
    let Stride1Pool {
        planes,
        input: [h, w],
        kernel: [kh, kw],
        pad: [ph, pw],
        output: [oh, ow],
    } = shape;
    let n = L::N;
    // SAFETY: the caller has `L`.
    let neg = unsafe { L::splat(f32::MIN) };
    // SAFETY: as above.
    let (keep_in, keep_out) = unsafe {
        (
            [L::first(w), L::first(w.saturating_sub(n))],
            [L::first(ow), L::first(ow.saturating_sub(n))],
        )
    };
    for p in 0..planes {
        let plane = x.wrapping_add(p * h * w);
        for r in 0..oh {
            let rows = r.saturating_sub(ph)..(r + kh - ph).min(h);
            // SAFETY: the rows are inside the plane (`is_taken`), the
            // kept columns inside its rows; `L`'s instructions are
            // enabled, per the caller.
            unsafe {
                let mut row = [
                    column_maxima::<L>(plane, w, rows.clone(), 0, keep_in[0]),
                    if TWO && w > n {
                        column_maxima::<L>(plane, w, rows, n, keep_in[1])
                    } else {
                        neg
                    },
                ];
                // Lane pw + c holds column c; the padding's lanes
                // -FLT_MAX, as the masked loads left past the plane.
                for _ in 0..pw {
                    let second = if TWO {
                        L::shift_up(row[0], row[1])
                    } else {
                        neg
                    };
                    row = [L::shift_up(neg, row[0]), second];
                }
                // Window column j of output q: lane q + j of the row.
                let mut best = row;
                for _ in 1..kw {
                    row = [L::shift_in(row[0], row[1]), L::shift_in(row[1], neg)];
                    best[0] = L::max(row[0], best[0]);
                    if TWO {
                        best[1] = L::max(row[1], best[1]);
                    }
                }
                let out = y.wrapping_add((p * oh + r) * ow);
                L::store_masked(keep_out[0], out, best[0]);
                if TWO && ow > n {
                    L::store_masked(keep_out[1], out.add(n), best[1]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general loop's arithmetic: column maxima from -FLT_MAX over the
    /// clipped rows, then the clipped window left to right, the held
    /// value kept unless the new is greater.
    fn by_definition(x: &[f32], shape: Stride1Pool) -> Vec<f32> {
        let Stride1Pool {
            planes,
            input: [h, w],
            kernel: [kh, kw],
            pad: [ph, pw],
            output: [oh, ow],
        } = shape;
        let larger = |m: f32, v: f32| if v > m { v } else { m };
        let mut y = Vec::new();
        for p in 0..planes {
            for r in 0..oh {
                let mut columns = vec![f32::MIN; w];
                for row in r.saturating_sub(ph)..(r + kh - ph).min(h) {
                    for (c, m) in columns.iter_mut().enumerate() {
                        *m = larger(*m, x[(p * h + row) * w + c]);
                    }
                }
                for q in 0..ow {
                    let window = &columns[q.saturating_sub(pw)..(q + kw - pw).min(w)];
                    y.push(window[1..].iter().fold(window[0], |m, &v| larger(m, v)));
                }
            }
        }
        y
    }

    #[test]
    fn windows_give_the_general_loops_bits() {
        let mut seed = 5u32;
        let mut value = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        // (h, w, kernel, pad, output): GoogLeNet's 3x3 pad 1 (rows in
        // one register and in two of either width), planes wider than two registers,
        // Caffe's rounding up past the input, no padding, rectangular
        // windows and padding, one column.
        let cases = [
            (14, 14, [3, 3], [1, 1], [14, 14]),
            (28, 28, [3, 3], [1, 1], [28, 28]),
            (5, 37, [3, 3], [1, 1], [5, 37]),
            (6, 6, [3, 3], [1, 1], [7, 7]),
            (9, 20, [2, 4], [0, 0], [8, 17]),
            (7, 19, [5, 3], [2, 0], [7, 17]),
            (4, 1, [3, 3], [1, 2], [4, 3]),
            // The widest rows two registers take, and one column more.
            (4, 30, [3, 3], [1, 1], [4, 30]),
            (3, 31, [3, 3], [1, 1], [3, 31]),
            // AVX2's two registers: a row of 15 and its padding, a 2x2
            // window padded by 1 past both edges (MobileNet-YOLOv3 lite's
            // pool at 19 x 19, two AVX-512 registers), one register.
            (5, 15, [3, 3], [1, 1], [5, 15]),
            (3, 9, [2, 2], [1, 1], [4, 10]),
            (19, 19, [2, 2], [1, 1], [20, 20]),
            (4, 5, [3, 3], [1, 1], [4, 5]),
        ];
        for (h, w, kernel, pad, output) in cases {
            let shape = Stride1Pool {
                planes: 3,
                input: [h, w],
                kernel,
                pad,
                output,
            };
            assert!(shape.is_taken(), "{shape:?}");
            let mut x: Vec<f32> = (0..3 * h * w).map(|_| value()).collect();
            // A NaN never wins; ties keep the first.
            x[h * w / 2] = f32::NAN;
            x[1] = x[0];
            let [oh, ow] = output;
            let mut y = vec![f32::NAN; 3 * oh * ow + 4];
            if !max_pool_stride1(&x, shape, &mut y) {
                assert!(
                    y.iter().all(|v| v.is_nan()),
                    "nothing written without AVX-512 or AVX2"
                );
                continue;
            }
            let want = by_definition(&x, shape);
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&y[..3 * oh * ow]), bits(&want), "{shape:?}");
            assert!(
                y[3 * oh * ow..].iter().all(|v| v.is_nan()),
                "wrote past the planes"
            );
        }
    }

    #[test]
    fn windows_without_input_are_refused() {
        let shape = Stride1Pool {
            planes: 1,
            input: [4, 4],
            kernel: [2, 2],
            pad: [2, 2],
            output: [7, 7],
        };
        assert!(!shape.is_taken());
        let mut y = [7.0f32; 49];
        assert!(!max_pool_stride1(&[1.0; 16], shape, &mut y));
        assert!(y.iter().all(|&v| v == 7.0));
    }
}
