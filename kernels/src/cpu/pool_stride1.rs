//! MAX pooling at stride 1, padded or not, on AVX-512 and AVX2:
//! GoogLeNet's 3x3 pools inside its inception blocks (192-832 planes of
//! 28 x 28, 14 x 14 and 7 x 7, padding 1), MobileNet-YOLOv3 lite's 2x2
//! (padding 1 past both edges of 19 x 19), an SPP block's 5x5, 9x9 and
//! 13x13.
//!
//! The general loop's pieces of a row (the column maxima over 14 values,
//! the whole windows, the clipped ones at each edge one by one) cost 2.3
//! ns an output on GoogLeNet's planes, 10% of its pass. Here a row's
//! column maxima are made a register at a time. Where the row and its
//! padding fit four registers (up to 62 wide on AVX-512, 30 on AVX2,
//! padded by 1) and a window is narrower than a register, the windows'
//! maxima come from those registers shifted a window column at a time by
//! lane shifts, never through memory. Wider rows and windows go through
//! a buffer whose padding columns hold -FLT_MAX (Caffe's start), every
//! row's column maxima before any window's, since loads across the
//! stores just made wait for them (1 ns an output row by row, 0.33 ns
//! so).

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
        let [kh, kw] = shape.kernel;
        let [_, pw] = shape.pad;
        // Each count of registers a padded row and an output row take,
        // and each window of the nets' pools (padded to keep the plane's
        // size but MobileNet-YOLOv3 lite's 2x2), is a function of its
        // own: a count known keeps the row in registers, a window known
        // leaves no loop in a row but the clipped rows'. (With the
        // window's loops the row loop's counters went to the stack, and
        // one-register rows ran 40% slower on AVX-512.)
        let lanes = on_lanes!(|L| L::N).unwrap_or(usize::MAX);
        let (from, to) = (x.as_ptr(), y.as_mut_ptr());
        macro_rules! in_registers {
            ($registers:literal) => {
                match (kh, kw, pw) {
                    (3, 3, 1) => in_registers!($registers, 3, 3, 1),
                    (2, 2, 1) => in_registers!($registers, 2, 2, 1),
                    (5, 5, 2) => in_registers!($registers, 5, 5, 2),
                    (9, 9, 4) => in_registers!($registers, 9, 9, 4),
                    (13, 13, 6) => in_registers!($registers, 13, 13, 6),
                    _ => in_registers!($registers, 0, 0, 0),
                }
            };
            ($registers:literal, $kh:literal, $kw:literal, $pw:literal) => {
                // SAFETY: the assert put every plane inside `x` and `y`;
                // the padded row and the outputs fit the registers, the
                // window one.
                on_lanes!(|L| unsafe {
                    register_planes::<L, $registers, $kh, $kw, $pw>(from, shape, to)
                })
            };
        }
        // A window as wide as a register costs more in shifts than in
        // the buffer's loads (AVX2's 9x9 on 13 x 13 planes 0.052 ms
        // through the buffer, 0.060 shifted).
        let registers = (pw + w).max(ow).div_ceil(lanes);
        let in_registers = match registers {
            _ if kw >= lanes => None,
            1 => in_registers!(1),
            2 => in_registers!(2),
            3 => in_registers!(3),
            4 => in_registers!(4),
            _ => None,
        };
        if in_registers.is_some() {
            return true;
        }
        // Each output row's column maxima after `pad[1]` columns of -FLT_MAX,
        // and -FLT_MAX to the furthest value the row's last 16 windows read.
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
                    let m = column_maxima::<L, 0>(plane, w, rows.clone(), x0, keep);
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
unsafe fn column_maxima<L: Lanes, const KH: usize>(
    plane: *const f32,
    w: usize,
    rows: std::ops::Range<usize>,
    x0: usize,
    keep: L::M,
) -> L::V {
    // SAFETY: the caller has `L`.
    let neg = unsafe { L::splat(f32::MIN) };
    let mut m = neg;
    // The buffer's loop (`KH` 0) stays a plain loop over the rows: as the
    // guarded one below with a run-time count, AVX2's 56 x 56 planes took
    // 0.21 ms against 0.18.
    if KH == 0 {
        for row in rows {
            // SAFETY: the kept lanes are inside the plane; the others
            // read nothing.
            unsafe {
                let v = L::load_masked_or(keep, neg, plane.add(row * w + x0));
                m = L::max(v, m);
            }
        }
        return m;
    }
    // With the window's height known the loop unrolls into that many
    // guarded steps; unrolled in four from a count, its addresses took
    // registers the row loop's counters needed.
    for j in 0..KH {
        let row = rows.start + j;
        if row >= rows.end {
            break;
        }
        // SAFETY: as above.
        unsafe {
            let v = L::load_masked_or(keep, neg, plane.add(row * w + x0));
            m = L::max(v, m);
        }
    }
    m
}

/// [`pool_planes`] for rows that fit `R` registers of `L`, padding
/// included, whose outputs fit `R` too, and windows narrower than a
/// register: the row's column maxima are moved past the padding and
/// shifted by a window column at a time with lane shifts, never through
/// memory. A window of `KH x KW` padded by `PW` columns, or any (the
/// shape's) where `KW` is 0. On one Zen 4 core (2026-12-06, best of 2000
/// calls, ms, against two registers at most with the window's loops):
/// AVX-512 256 planes of 7 x 7 0.0054 -> 0.0037, of 14 x 14 0.0122 ->
/// 0.0094, of 28 x 28 0.044 -> 0.031, 512 of 19 x 19 (2x2 padded by 1)
/// 0.045 -> 0.024, 128 of 56 x 56 0.138 -> 0.067 (a buffer before);
/// AVX2 the same 0.0100 -> 0.0050, 0.026 -> 0.018, 0.126 -> 0.065, 0.122
/// -> 0.055.
///
/// # Safety
/// `L`'s instructions are enabled; as [`pool_planes`], with `pad[1] + w`
/// and `output[1]` at most `R N`; the window `KH x KW` padded by `PW`
/// columns unless `KW` is 0.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn register_planes<
    L: Lanes,
    const R: usize,
    const KH: usize,
    const KW: usize,
    const PW: usize,
>(
    x: *const f32,
    shape: Stride1Pool,
    y: *mut f32,
) {
    let Stride1Pool {
        planes,
        input: [h, w],
        kernel: [kh, kw],
        pad: [ph, pw],
        output: [oh, ow],
    } = shape;
    let (kw, pw) = if KW == 0 { (kw, pw) } else { (KW, PW) };
    let n = L::N;
    // SAFETY: the caller has `L`.
    let neg = unsafe { L::splat(f32::MIN) };
    // The columns and outputs each register keeps (no closure: it would
    // be compiled without `L`'s instructions).
    // SAFETY: as above.
    let (mut keep_in, mut keep_out) = unsafe { ([L::first(0); R], [L::first(0); R]) };
    for i in 0..R {
        // SAFETY: as above.
        unsafe {
            keep_in[i] = L::first(w.saturating_sub(i * n));
            keep_out[i] = L::first(ow.saturating_sub(i * n));
        }
    }
    for p in 0..planes {
        let plane = x.wrapping_add(p * h * w);
        for r in 0..oh {
            let rows = r.saturating_sub(ph)..(r + kh - ph).min(h);
            // SAFETY: the rows are inside the plane (`is_taken`), the
            // kept columns inside its rows; `L`'s instructions are
            // enabled, per the caller.
            unsafe {
                let mut row = [neg; R];
                for (i, register) in row.iter_mut().enumerate() {
                    if i == 0 || w > i * n {
                        *register =
                            column_maxima::<L, KH>(plane, w, rows.clone(), i * n, keep_in[i]);
                    }
                }
                // Lane pw + c holds column c; the padding's lanes
                // -FLT_MAX, as the masked loads left past the plane.
                for _ in 0..pw {
                    for i in (0..R).rev() {
                        row[i] = L::shift_up(if i == 0 { neg } else { row[i - 1] }, row[i]);
                    }
                }
                // Window column j of output q: lane q + j of the row.
                let mut best = row;
                for _ in 1..kw {
                    for i in 0..R {
                        row[i] = L::shift_in(row[i], if i + 1 < R { row[i + 1] } else { neg });
                        best[i] = L::max(row[i], best[i]);
                    }
                }
                let out = y.wrapping_add((p * oh + r) * ow);
                for (i, best) in best.into_iter().enumerate() {
                    if i == 0 || ow > i * n {
                        L::store_masked(keep_out[i], out.add(i * n), best);
                    }
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
        // (h, w, kernel, pad, output): GoogLeNet's 3x3 pad 1 (rows in one
        // to four registers of either width), planes wider than four,
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
            // The widest rows (padded by 1) two, three and four registers
            // take, and one column more: 15, 23 and 31 on AVX2, 31, 47
            // and 63 on AVX-512.
            (5, 15, [3, 3], [1, 1], [5, 15]),
            (4, 16, [3, 3], [1, 1], [4, 16]),
            (4, 23, [3, 3], [1, 1], [4, 23]),
            (4, 24, [3, 3], [1, 1], [4, 24]),
            (3, 31, [3, 3], [1, 1], [3, 31]),
            (3, 32, [3, 3], [1, 1], [3, 32]),
            (4, 47, [3, 3], [1, 1], [4, 47]),
            (4, 48, [3, 3], [1, 1], [4, 48]),
            (3, 63, [3, 3], [1, 1], [3, 63]),
            (3, 64, [3, 3], [1, 1], [3, 64]),
            // A 2x2 window padded by 1 past both edges (MobileNet-YOLOv3
            // lite's pool at 19 x 19: two AVX-512 registers, three AVX2),
            // one register.
            (3, 9, [2, 2], [1, 1], [4, 10]),
            (19, 19, [2, 2], [1, 1], [20, 20]),
            (4, 5, [3, 3], [1, 1], [4, 5]),
            // SPP's windows, each through its own function (AVX2's 9x9
            // and 13x13 through the buffer), and one 7x7 through the
            // general window's.
            (13, 13, [5, 5], [2, 2], [13, 13]),
            (13, 13, [9, 9], [4, 4], [13, 13]),
            (19, 19, [13, 13], [6, 6], [19, 19]),
            (10, 12, [7, 7], [3, 3], [10, 12]),
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
