//! One plane of a 3 x 3 depthwise convolution at stride 1 or 2 with a
//! row and a column of zeros around it (MobileNet's depthwise layers,
//! Caffe's `Convolution` with `group` = channels, `kernel_size: 3`,
//! `pad: 1`, `stride` 1 or 2), read where it lies on AVX-512 and on AVX2
//! + FMA.
//!
//! The general plane ([`super::depthwise_plane`]) reads a padded copy of
//! the plane (at stride 2, its even and odd columns split apart). For
//! MobileNet-SSD's 64 x 150 x 150 strided layer that copy took 62% of the
//! layer on a Zen 4 core, for its unstrided 32 x 150 x 150 one about a
//! third on an Intel core (`perf`): the plane is too large for L2, so it
//! was read from beyond it and written to L2 to be read again. Here each
//! register of an output row reads its input rows where they lie: at
//! stride 1 the window's left and right columns one value either side of
//! its middle, masked at a row's ends; at stride 2 each pair of
//! registers of an input row split into its even and odd columns in
//! registers. The padding is masked lanes, a register of zeros, and the
//! rows above and below the plane a row of zeros.

#[cfg(target_arch = "x86_64")]
use super::depthwise::finish;
#[cfg(target_arch = "x86_64")]
use super::lanes::{Lanes, on_lanes};
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};

/// `out[r][q] = bias + sum`, the sum over the window's rows `ki` and
/// columns `kj` in order of
/// `weights[3 ki + kj] * input[r + ki - 1][q + kj - 1]`,
/// zeros outside the `height x width` plane, each product rounded and
/// then added (as a plain loop computes it, and as
/// [`super::depthwise_plane`] does over a padded copy): Caffe's depthwise
/// `Convolution` (`group` = channels, `kernel_size: 3`, `pad: 1`) on one
/// channel's plane. `out` has the plane's `height x width`. With
/// `rectify`, each output then goes through Caffe's `ReLU` (its bits:
/// [`super::relu`]) as it is stored. Says whether it ran (`false`:
/// neither AVX-512 nor AVX2, and nothing was written).
///
/// ```
/// use blob_kernels::cpu::depthwise_3x3_stride1;
/// // The centre tap alone copies the plane, the bias added.
/// let input: Vec<f32> = (0..12).map(|v| v as f32).collect(); // 3 x 4
/// let mut weights = [0.0f32; 9];
/// weights[4] = 1.0;
/// let mut out = [0.0f32; 12];
/// if depthwise_3x3_stride1(&input, (3, 4), &weights, 0.5, false, &mut out) {
///     assert_eq!(out[5], 5.5);
/// }
/// ```
///
/// # Panics
/// If `input` or `out` holds fewer than `height * width` values, or
/// `weights` fewer than 9.
#[track_caller]
pub fn depthwise_3x3_stride1(
    input: &[f32],
    plane: (usize, usize),
    weights: &[f32],
    bias: f32,
    rectify: bool,
    out: &mut [f32],
) -> bool {
    window::<1>(input, plane, (weights, bias), rectify, out)
}

/// [`depthwise_3x3_stride1`] at stride 2 (Caffe's `stride: 2`): the sum
/// of `weights[3 ki + kj] * input[2 r + ki - 1][2 q + kj - 1]` in the
/// same order, the same rounding, the bias and `rectify` after it; `out`
/// has `height.div_ceil(2)` rows of `width.div_ceil(2)`. Says whether it
/// ran.
///
/// ```
/// use blob_kernels::cpu::depthwise_3x3_stride2;
/// // The centre tap alone picks the even rows' even columns.
/// let input: Vec<f32> = (0..12).map(|v| v as f32).collect(); // 3 x 4
/// let mut weights = [0.0f32; 9];
/// weights[4] = 1.0;
/// let mut out = [0.0f32; 4];
/// if depthwise_3x3_stride2(&input, (3, 4), &weights, 0.5, false, &mut out) {
///     assert_eq!(out, [0.5, 2.5, 8.5, 10.5]);
/// }
/// ```
///
/// # Panics
/// If `input` holds fewer than `height * width` values, `weights` fewer
/// than 9 or `out` fewer than the outputs.
#[track_caller]
pub fn depthwise_3x3_stride2(
    input: &[f32],
    plane: (usize, usize),
    weights: &[f32],
    bias: f32,
    rectify: bool,
    out: &mut [f32],
) -> bool {
    window::<2>(input, plane, (weights, bias), rectify, out)
}

/// [`depthwise_3x3_stride1`] or [`depthwise_3x3_stride2`], as `S` says.
#[track_caller]
fn window<const S: usize>(
    input: &[f32],
    (height, width): (usize, usize),
    (weights, bias): (&[f32], f32),
    rectify: bool,
    out: &mut [f32],
) -> bool {
    let outputs = height.div_ceil(S) * width.div_ceil(S);
    assert!(
        input.len() >= height * width && weights.len() >= 9 && out.len() >= outputs,
        "depthwise_3x3_stride{S}: a {height} x {width} plane needs an input of {}, 9 weights \
         and an output of {outputs}, got {}, {} and {}",
        height * width,
        input.len(),
        weights.len(),
        out.len()
    );
    if outputs == 0 {
        return super::isa() >= super::Isa::Avx2;
    }
    #[cfg(target_arch = "x86_64")]
    return on_lanes!(|L| {
        // SAFETY: the assert above proves every read (whole registers
        // only where they lie inside a row, the rest masked) and write
        // inside the slices.
        unsafe {
            let (input, out) = (input.as_ptr(), out.as_mut_ptr());
            if rectify {
                plane::<L, S, true>(input, (height, width), weights, bias, out)
            } else {
                plane::<L, S, false>(input, (height, width), weights, bias, out)
            }
        }
    })
    .is_some();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The narrowest plane whose input rows a pass of two output rows asks
/// for two passes ahead. A layer of wide planes (MobileNet's 150 x 150
/// and 75 x 75) is beyond L2 and its planes cross a page every few rows,
/// where the hardware's prefetch starts over. One Intel core (AVX-512,
/// 2026-12-02, one build with and without, medians of 5 alternating
/// runs of MobileNet-SSD): the 64 x 150 x 150 layer at stride 2 0.56-0.60
/// -> 0.36-0.38 ms, 128 x 75 x 75 at stride 2 0.16-0.18 -> 0.14-0.15, the
/// stride-1 layers at 150 x 150 and 75 x 75 2-10% faster; the 38 x 38
/// planes (a layer within L2) ran 5-7% slower with it, 19 x 19 level.
/// Such a pass also asks, as writes, for the output rows the next pass
/// writes: a net's output of 2.9 MB was last written a pass ago and its
/// lines come from memory. In MobileNet-SSD on one Zen 3 core (AVX2,
/// 2026-12-04, one build with and without, medians of 12 alternating
/// runs): conv1/dw (32 x 150 x 150) 0.590 -> 0.460 ms, the 75 x 75 and
/// strided layers level or 2-5% faster, the pass 35.0 -> 34.3 ms; at two
/// threads conv1/dw 0.332 -> 0.270, the pass 20.8 -> 19.7. Two passes
/// ahead and three ran no better, or slower (3 ahead: 0.452 and the 75 x
/// 75 layers 7-10% slower); asking for the input four or six passes
/// ahead rather than two, level.
#[cfg(target_arch = "x86_64")]
const AHEAD_MIN_WIDTH: usize = 64;

/// The padding's rows of planes up to 992 wide.
#[cfg(target_arch = "x86_64")]
static ZERO_ROW: [f32; 1024] = [0.0; 1024];

/// [`window`] in registers of `L`: [`BLOCK_ROWS`] output rows at a time
/// at stride 1, two at stride 2 (sharing input rows, and several sums in
/// flight where one waits on its nine adds in turn), then the rows
/// left, two and one; at stride 2, rows of one or two registers in
/// [`narrow_plane_stride2`]. At stride 2 on a Zen 4 core, 64 planes
/// of 150 x 150 (ms, rows a block 1 / 2 / 4): AVX-512 0.19 / 0.18 / 0.19,
/// AVX2 0.31 / 0.30 / 0.31; 128 of 75 x 75: 0.117 / 0.111 / 0.114 and
/// 0.178 / 0.158 / 0.161.
///
/// # Safety
/// `L`'s instructions are enabled; `input` holds `height * width` values,
/// `out` the outputs, `weights` 9.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn plane<L: Lanes, const S: usize, const RECTIFY: bool>(
    input: *const f32,
    (height, width): (usize, usize),
    weights: &[f32],
    bias: f32,
    out: *mut f32,
) {
    // SAFETY: `L`'s instructions are enabled, and `weights` holds 9
    // (caller).
    let (w, bias): ([L::V; 9], L::V) = unsafe {
        (
            std::array::from_fn(
                #[inline(always)]
                |p| L::splat(weights[p]),
            ),
            L::splat(bias),
        )
    };
    let (rows, columns) = (height.div_ceil(S), width.div_ceil(S));
    if S == 2 && columns <= 2 * L::N {
        // SAFETY: as the caller promises; the rows fit one register or
        // two.
        unsafe {
            let plane = (height, width);
            if columns <= L::N {
                narrow_plane_stride2::<L, 1, RECTIFY>(input, plane, (&w, bias), out);
            } else {
                narrow_plane_stride2::<L, 2, RECTIFY>(input, plane, (&w, bias), out);
            }
        }
        return;
    }
    // The padding's rows: read as whole registers up to the plane's width.
    // A row of zeros allocated for each plane cost MobileNet's 256 x 38
    // x 38 layer 12% of its time (three such layers, medians of 5 on a
    // Zen 4 core: 0.249 -> 0.207 ms with the shared row; 128 x 75 x 75
    // 0.309 -> 0.290): the widest planes alone allocate theirs.
    let wide;
    let zeros: &[f32] = if width + 2 * L::N <= ZERO_ROW.len() {
        &ZERO_ROW
    } else {
        wide = vec![0.0f32; width + 2 * L::N];
        &wide
    };
    // Output row r reads input rows S r - 1 ..= S r + 1.
    let line = |iy: usize| -> *const f32 {
        match iy.checked_sub(1) {
            // SAFETY: row iy - 1 is the plane's.
            Some(y) if y < height => unsafe { input.add(y * width) },
            _ => zeros.as_ptr(),
        }
    };
    let mut r = 0;
    while r < rows {
        let lines: [*const f32; LINES] = std::array::from_fn(|i| line(S * r + i));
        // The output rows of this pass: `BLOCK_ROWS` at stride 1, two at
        // stride 2, fewer at the plane's end.
        let block = match S {
            1 => BLOCK_ROWS,
            _ => 2,
        };
        let block = if r + block <= rows {
            block
        } else if r + 2 <= rows {
            2
        } else {
            1
        };
        if width >= AHEAD_MIN_WIDTH {
            // The 2 S input rows that output rows r + 4 and r + 5 read
            // last (past the plane's last row, the next channel's first:
            // a prefetch reads nothing, wherever it points); in blocks of
            // four rows, half of the rows the next block reads first.
            // Asking for every row of the block after next ran 4-9%
            // slower (the layers alone, Zen 5, 2026-12-05), and level in
            // MobileNet-SSD.
            let first = S * r + 3 + 2 * S;
            for y in first..first + 2 * S {
                let row = input.wrapping_add(y * width);
                for at in (0..width).step_by(16) {
                    // SAFETY: a prefetch reads nothing.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(at) as *const i8) };
                }
            }
            // Output rows r + 2 and r + 3, asked for as writes (past the
            // plane's last row, the next plane's first).
            for y in r + 2..r + 4 {
                let row = out.wrapping_add(y * columns);
                for at in (0..columns).step_by(16) {
                    // SAFETY: a prefetch reads nothing.
                    unsafe { _mm_prefetch::<_MM_HINT_ET0>(row.wrapping_add(at) as *const i8) };
                }
            }
        }
        // SAFETY: each line holds `width` values (the plane's rows or the
        // zeros), and output rows r..r + block are rows of `out`
        // (caller).
        unsafe {
            let dst = out.add(r * columns);
            let dsts: [*mut f32; BLOCK_ROWS] =
                std::array::from_fn(|i| dst.wrapping_add(i * columns));
            match block {
                BLOCK_ROWS => rows_3x3::<L, S, BLOCK_ROWS, RECTIFY>(&lines, width, &w, bias, dsts),
                2 => rows_3x3::<L, S, 2, RECTIFY>(&lines, width, &w, bias, [dsts[0], dsts[1]]),
                _ => rows_3x3::<L, S, 1, RECTIFY>(&lines, width, &w, bias, [dst]),
            }
        }
        r += block;
    }
}

/// [`plane`] at stride 2 for output rows of `C` registers or fewer (1
/// or 2: planes up to `2 C N` wide, MobileNet's 19 x 19 and 38 x 38,
/// YOLO's 26 x 26): each input row split into its windows' three
/// columns once, for the two output rows that read it, the whole plane
/// in one loop of rows. Passes of two output rows each read five input
/// rows, set up their rows and masks anew, and took 512 planes of 19 x
/// 19 about 300 cycles a plane on a Zen 5 core. The same products and
/// adds, in the same order.
///
/// # Safety
/// `L`'s instructions are enabled; `input` holds `height * width` values
/// (`width` at most `2 C N`), `out` the `height.div_ceil(2)` rows of
/// `width.div_ceil(2)` outputs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn narrow_plane_stride2<L: Lanes, const C: usize, const RECTIFY: bool>(
    input: *const f32,
    (height, width): (usize, usize),
    (w, bias): (&[L::V; 9], L::V),
    out: *mut f32,
) {
    let (rows, columns) = (height.div_ceil(2), width.div_ceil(2));
    // SAFETY: the caller has `L`.
    unsafe {
        // Register c of a row reads its values 2 c N.. in two loads, and
        // writes its outputs c N..
        let loads: [(L::M, L::M); C] = std::array::from_fn(|c| {
            let from = 2 * c * L::N;
            (
                L::first(width.saturating_sub(from)),
                L::first(width.saturating_sub(from + L::N)),
            )
        });
        let kept: [L::M; C] = std::array::from_fn(|c| L::first(columns.saturating_sub(c * L::N)));
        let zero = L::zero();
        let row = |y: usize| (y < height).then(|| input.wrapping_add(y * width));
        let mut above = [[zero; 3]; C];
        for r in 0..rows {
            let middle = stride2_taps::<L, C>(row(2 * r), &loads);
            let below = stride2_taps::<L, C>(row(2 * r + 1), &loads);
            for c in 0..C {
                let mut acc = zero;
                for (ki, line) in [&above[c], &middle[c], &below[c]].into_iter().enumerate() {
                    for (kj, &x) in line.iter().enumerate() {
                        acc = L::add(acc, L::mul(w[ki * 3 + kj], x));
                    }
                }
                let at = out.wrapping_add(r * columns + c * L::N);
                L::store_masked(kept[c], at, finish::<L, RECTIFY>(acc, bias));
            }
            above = below;
        }
    }
}

/// A row's left, middle and right columns of each stride-2 window of
/// [`narrow_plane_stride2`], `C` registers of them, zero past the row's
/// ends (`loads` keep each register's two loads inside the row); zeros
/// for a padding row (`None`). A function, not a closure: a closure in
/// generic code is compiled without the family's instructions.
///
/// # Safety
/// `L`'s instructions are enabled; the row holds the values `loads`
/// keep.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn stride2_taps<L: Lanes, const C: usize>(
    row: Option<*const f32>,
    loads: &[(L::M, L::M); C],
) -> [[L::V; 3]; C] {
    // SAFETY: as the caller promises; masked loads read nothing past
    // the row.
    unsafe {
        let zero = L::zero();
        let mut taps = [[zero; 3]; C];
        let Some(row) = row else {
            return taps;
        };
        // The odd column before each register's first: the padding's zero
        // before the row, then the last of the register before.
        let mut odd_before = zero;
        for (c, (taps, &(low, high))) in taps.iter_mut().zip(loads).enumerate() {
            let at = row.wrapping_add(2 * c * L::N);
            let (lo, hi) = (
                L::load_masked(low, at),
                L::load_masked(high, at.wrapping_add(L::N)),
            );
            let (even, odd) = (L::even(lo, hi), L::odd(lo, hi));
            *taps = [L::shift_up(odd_before, odd), even, odd];
            odd_before = odd;
        }
        taps
    }
}

/// The output rows a pass of [`plane`] takes at stride 1: its input
/// rows are read once for up to three output rows each, and each
/// register's four sums are independent chains of adds. Four rather
/// than two, one core, AVX-512 / AVX2, medians of 5 alternating runs of
/// the layer alone (2026-12-05, Zen 5), ms: 32 x 150 x 150 0.125 / 0.214
/// -> 0.117 / 0.191, 128 x 75 x 75 0.147 / 0.248 -> 0.133 / 0.217; six
/// ran 7-14% slower than four. At stride 2 three rows a pass ran within
/// the noise of two (an input row serves at most two output rows).
#[cfg(target_arch = "x86_64")]
const BLOCK_ROWS: usize = 4;

/// The input rows a pass reads: `S (R - 1) + 3` for `R` output rows.
#[cfg(target_arch = "x86_64")]
const LINES: usize = BLOCK_ROWS + 2;

/// Output rows `0..R` of a block, each `width.div_ceil(S)` long at
/// `dsts`, whose input rows are `lines[0..S (R - 1) + 3]` (each `width`
/// long): a register of each row at a time, its loads masked where they
/// would leave the row.
///
/// # Safety
/// `L`'s instructions are enabled; each of the lines holds `width`
/// values, each of the outputs `width.div_ceil(S)`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rows_3x3<L: Lanes, const S: usize, const R: usize, const RECTIFY: bool>(
    lines: &[*const f32; LINES],
    width: usize,
    w: &[L::V; 9],
    bias: L::V,
    dsts: [*mut f32; R],
) {
    let columns = width.div_ceil(S);
    // At stride 2, each input row's odd columns of the register before
    // (its last is the window's left column for the next register's
    // first output), zero before the first: the left padding.
    // SAFETY: the caller has `L`.
    let mut odd_before = [unsafe { L::zero() }; LINES];
    let mut q = 0;
    while q < columns {
        // Whole loads where every load of the register's window lies
        // inside the row.
        let whole = match S {
            1 => q >= 1 && q + L::N < width,
            _ => S * q + S * L::N <= width,
        };
        let at = (lines, q, width);
        // SAFETY: q < columns, so the window's middle column of the
        // register's first output lies inside the row; whole loads as
        // just tested.
        let acc = unsafe {
            if whole {
                sums::<L, S, R, false>(at, &mut odd_before, w)
            } else {
                sums::<L, S, R, true>(at, &mut odd_before, w)
            }
        };
        for (acc, dst) in acc.iter().zip(dsts) {
            // SAFETY: the row's outputs from q on, a whole register where
            // one fits, the rest masked.
            unsafe {
                let v = finish::<L, RECTIFY>(*acc, bias);
                if q + L::N <= columns {
                    L::store(dst.add(q), v);
                } else {
                    L::store_masked(L::first(columns - q), dst.add(q), v);
                }
            }
        }
        q += L::N;
    }
}

/// A register of each output row of the block from output column `q`:
/// each input row's taps read once and multiplied into every output row
/// that reads them, in the order of the taps (row of the window, then
/// column), product rounded, then added; `MASKED` loads stop at the
/// row's ends.
///
/// # Safety
/// `L`'s instructions are enabled; `S q < width`, and without `MASKED`
/// the register's loads lie inside the row (see [`rows_3x3`]); the lines
/// hold `width` values.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sums<L: Lanes, const S: usize, const R: usize, const MASKED: bool>(
    at: (&[*const f32; LINES], usize, usize),
    odd_before: &mut [L::V; LINES],
    w: &[L::V; 9],
) -> [L::V; R] {
    debug_assert!(
        S * (R - 1) + 3 <= LINES,
        "a pass reads at most LINES input rows"
    );
    // SAFETY: the caller has `L`.
    let mut acc = [unsafe { L::zero() }; R];
    // One call an input row, each its own constant, so that every test
    // of which output rows read it folds away.
    // SAFETY: as the caller promises.
    unsafe {
        input_row::<L, S, R, MASKED, 0>(&mut acc, odd_before, at, w);
        input_row::<L, S, R, MASKED, 1>(&mut acc, odd_before, at, w);
        input_row::<L, S, R, MASKED, 2>(&mut acc, odd_before, at, w);
        input_row::<L, S, R, MASKED, 3>(&mut acc, odd_before, at, w);
        input_row::<L, S, R, MASKED, 4>(&mut acc, odd_before, at, w);
        input_row::<L, S, R, MASKED, 5>(&mut acc, odd_before, at, w);
    }
    acc
}

/// Input row `I` of [`sums`] (nothing past row `S (R - 1) + 2`): for the
/// register's lanes `i`, its columns `S (q + i) - 1` (the window's left
/// column), `S (q + i)` (its middle) and `S (q + i) + 1` (its right),
/// zero outside the row, each multiplied into the output rows that read
/// the row.
///
/// # Safety
/// As [`sums`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn input_row<
    L: Lanes,
    const S: usize,
    const R: usize,
    const MASKED: bool,
    const I: usize,
>(
    acc: &mut [L::V; R],
    odd_before: &mut [L::V; LINES],
    (lines, q, width): (&[*const f32; LINES], usize, usize),
    w: &[L::V; 9],
) {
    if I > S * (R - 1) + 2 {
        return;
    }
    let column = S * q;
    // SAFETY: as the caller promises: whole loads lie inside the row,
    // masked ones read none of its values past its ends.
    let taps = unsafe {
        let p = lines[I].add(column);
        let left_in_row = width - column;
        match (S, MASKED) {
            (1, false) => [L::load(p.sub(1)), L::load(p), L::load(p.add(1))],
            (1, true) => {
                let middle = L::load_masked(L::first(left_in_row.min(L::N)), p);
                let right = L::load_masked(L::first((left_in_row - 1).min(L::N)), p.add(1));
                // Column -1: the padding's zero before the row's first.
                let left = if column == 0 {
                    L::shift_up(L::zero(), middle)
                } else {
                    L::load_masked(L::first((left_in_row + 1).min(L::N)), p.sub(1))
                };
                [left, middle, right]
            }
            _ => {
                let (lo, hi) = if MASKED {
                    let hi = if left_in_row > L::N {
                        L::load_masked(L::first(left_in_row - L::N), p.add(L::N))
                    } else {
                        L::zero()
                    };
                    (L::load_masked(L::first(left_in_row), p), hi)
                } else {
                    (L::load(p), L::load(p.add(L::N)))
                };
                let (even, odd) = (L::even(lo, hi), L::odd(lo, hi));
                let left = L::shift_up(odd_before[I], odd);
                odd_before[I] = odd;
                [left, even, odd]
            }
        }
    };
    for (o, acc) in acc.iter_mut().enumerate() {
        // Output row o reads input row I through the window's row
        // I - S o, where there is one.
        if S * o > I || I - S * o >= 3 {
            continue;
        }
        let ki = I - S * o;
        for (kj, &x) in taps.iter().enumerate() {
            // SAFETY: the caller has `L`.
            *acc = unsafe { L::add(*acc, L::mul(w[ki * 3 + kj], x)) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::window_3x3_checks::{assert_bits, reference, values};
    use super::*;

    #[test]
    fn planes_give_the_definitions_bits() {
        let mut value = values(11);
        // Planes of one row and column, odd and even sides, blocks of two
        // output rows and the rows past them, rows of less than a
        // register, of a register and one (whose window's right column
        // leaves the row in the first register), whole registers and the
        // masked ones past them (at stride 2 a second one where a row's
        // last pair spans two), MobileNet's 150 x 150 and 75 x 75, a
        // plane wider than the shared row of zeros.
        for (h, w) in [
            (1, 1),
            (2, 3),
            (5, 7),
            (4, 8),
            (9, 16),
            (3, 17),
            (9, 32),
            (8, 33),
            (10, 64),
            (11, 65),
            (3, 95),
            (7, 150),
            (17, 75),
            (3, 1001),
        ] {
            let input: Vec<f32> = (0..h * w).map(|_| value()).collect();
            let weights: Vec<f32> = (0..9).map(|_| value()).collect();
            let bias = value();
            for stride in [1, 2] {
                let want = reference(&input, (h, w), stride, &weights, bias);
                let kernel = |rectify, out: &mut [f32]| match stride {
                    1 => depthwise_3x3_stride1(&input, (h, w), &weights, bias, rectify, out),
                    _ => depthwise_3x3_stride2(&input, (h, w), &weights, bias, rectify, out),
                };
                assert_bits(&want, kernel, &format!("{h} x {w} at stride {stride}"));
            }
        }
    }

    #[test]
    #[should_panic(expected = "a 4 x 4 plane needs an input of 16")]
    fn a_short_input_is_refused() {
        depthwise_3x3_stride2(&[0.0; 15], (4, 4), &[0.0; 9], 0.0, false, &mut [0.0; 4]);
    }

    #[test]
    #[should_panic(expected = "and an output of 16, got 16, 9 and 15")]
    fn a_short_output_is_refused() {
        depthwise_3x3_stride1(&[0.0; 16], (4, 4), &[0.0; 9], 0.0, false, &mut [0.0; 15]);
    }
}
