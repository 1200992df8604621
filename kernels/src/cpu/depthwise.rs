//! One plane of a depthwise convolution (MobileNet's 3 x 3 layers, one
//! kernel a channel) on AVX-512 and on AVX2 + FMA, from the padded plane
//! the caller lays out.
//!
//! The portable loop, 16 outputs summed over the taps in an array, was
//! taken apart by the compiler into scalars moved through the stack a
//! tap at a time: MobileNet-SSD's 150 x 150 layer ran at 19 GFLOP/s on
//! a Zen 5 core. Here four registers of outputs stay in registers across
//! every tap.

#[cfg(target_arch = "x86_64")]
use super::finish::{Rectifier, finished};
#[cfg(target_arch = "x86_64")]
use super::lanes::{Lanes, on_lanes};
#[cfg(doc)]
use super::relu;

/// The widest register's outputs: a row's reads are rounded up to it.
const LANES: usize = 16;

/// Registers of outputs summed together over the taps, so that each
/// tap's loads and adds are independent of the previous tap's for a
/// while (an add's latency is 3-4 cycles; two adds a cycle).
#[cfg(target_arch = "x86_64")]
const STRIPS: usize = 4;
/// Where a depthwise plane reads its input: output `(r, q)` reads tap `p`
/// at `offsets[p] + r * row_step + q`.
#[derive(Clone, Copy, Debug)]
pub struct DepthwiseTaps<'a> {
    /// Each tap's place in the input for output (0, 0).
    pub offsets: &'a [usize],
    /// How far apart in the input the reads of consecutive output rows
    /// start (a padded row's length times the stride).
    pub row_step: usize,
    /// Output rows and columns.
    pub rows: usize,
    /// Outputs a row.
    pub columns: usize,
}

impl DepthwiseTaps<'_> {
    /// How many input values the plane's reads reach: every row's
    /// columns rounded up to a whole register (the input must hold that
    /// many; its rows have room past their ends).
    ///
    /// ```
    /// use blob_kernels::cpu::DepthwiseTaps;
    /// let taps = DepthwiseTaps { offsets: &[0, 1, 2], row_step: 20, rows: 2, columns: 3 };
    /// assert_eq!(taps.reach(), 2 + 20 + 16);
    /// ```
    pub fn reach(&self) -> usize {
        if self.rows == 0 || self.columns == 0 {
            return 0;
        }
        self.offsets.iter().max().copied().unwrap_or(0)
            + (self.rows - 1) * self.row_step
            + self.columns.next_multiple_of(LANES)
    }
}

/// `out[r][q] = bias + the sum over taps p, in order, of weights[p] *
/// input[offsets[p] + r * row_step + q]`, each product rounded and then
/// added, the bias last, as a plain loop computes it (Caffe's depthwise `Convolution`, `group` =
/// channels, on one channel's plane); with `rectify`, each output then
/// through Caffe's `ReLU` (its bits: [`relu`]) before it is stored, rather
/// than in a pass of its own over the plane. Says whether it ran (`false`:
/// neither AVX-512 nor AVX2, and nothing was written).
///
/// ```
/// use blob_kernels::cpu::{DepthwiseTaps, depthwise_plane};
/// // A 1 x 2 window [1, 10] along rows of the 2 x 4 image
/// // [[1 2 3 4] [5 6 7 8]], each row with room for a register past it.
/// let mut input = vec![0.0f32; 2 * 20];
/// input[..4].copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
/// input[20..24].copy_from_slice(&[5.0, 6.0, 7.0, 8.0]);
/// let taps = DepthwiseTaps { offsets: &[0, 1], row_step: 20, rows: 2, columns: 3 };
/// let mut out = [0.0f32; 6];
/// if depthwise_plane(&input, taps, &[1.0, 10.0], 0.5, false, &mut out) {
///     assert_eq!(out, [21.5, 32.5, 43.5, 65.5, 76.5, 87.5]);
/// }
/// ```
///
/// # Panics
/// If `input` is shorter than [`DepthwiseTaps::reach`], `weights` shorter
/// than the taps or `out` than the plane.
#[track_caller]
pub fn depthwise_plane(
    input: &[f32],
    taps: DepthwiseTaps<'_>,
    weights: &[f32],
    bias: f32,
    rectify: bool,
    out: &mut [f32],
) -> bool {
    assert!(
        input.len() >= taps.reach()
            && weights.len() >= taps.offsets.len()
            && out.len() >= taps.rows * taps.columns,
        "depthwise_plane: {} x {} outputs of {} taps need an input of {}, {} weights and \
         an output of {}, got {}, {} and {}",
        taps.rows,
        taps.columns,
        taps.offsets.len(),
        taps.reach(),
        taps.offsets.len(),
        taps.rows * taps.columns,
        input.len(),
        weights.len(),
        out.len()
    );
    if taps.reach() == 0 {
        return super::isa() >= super::Isa::Avx2;
    }
    #[cfg(target_arch = "x86_64")]
    return on_lanes!(|L| {
        // SAFETY: the assert above proves every read (up to `reach`, a
        // row's columns rounded up to the widest register) and write (up
        // to rows x columns) inside the slices.
        unsafe {
            let (input, out) = (input.as_ptr(), out.as_mut_ptr());
            if rectify {
                plane::<L, true>(input, taps, weights, bias, out)
            } else {
                plane::<L, false>(input, taps, weights, bias, out)
            }
        }
    })
    .is_some();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`depthwise_plane`] in registers of `L`, rectified with `RECTIFY`:
/// two rows at a time where two are left, so twice the sums are in
/// flight and each tap's adds wait less on the last tap's (a row's last
/// register, alone, summed its 9 taps one add latency after another;
/// in pairs, MobileNet-SSD's 75 x 75 and 38 x 38 layers took 3-8% less
/// on a Zen 4 core).
///
/// # Safety
/// `L`'s instructions are enabled; `input` must hold
/// [`DepthwiseTaps::reach`] values, `out` `rows * columns`, `weights` one
/// a tap.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn plane<L: Lanes, const RECTIFY: bool>(
    input: *const f32,
    taps: DepthwiseTaps<'_>,
    weights: &[f32],
    bias: f32,
    out: *mut f32,
) {
    // SAFETY: `L`'s instructions are enabled, per the caller.
    let bias = unsafe { L::splat(bias) };
    if is_3x3_unit_stride(taps) {
        // SAFETY: as the caller promises.
        unsafe {
            match L::ISA {
                // AVX2's 16 registers hold the 9 weights and 4 sums.
                super::Isa::Avx2 => plane_3x3::<L, 2, 2, RECTIFY>(input, taps, weights, bias, out),
                _ => plane_3x3::<L, 4, 2, RECTIFY>(input, taps, weights, bias, out),
            }
        }
        return;
    }
    let mut r = 0;
    while r < taps.rows {
        // SAFETY: rows r.. (two where two are left) are the plane's, as
        // `rows` requires.
        unsafe {
            if r + 1 < taps.rows {
                rows::<L, 2, RECTIFY>(input, taps, weights, bias, r, out);
                r += 2;
            } else {
                rows::<L, 1, RECTIFY>(input, taps, weights, bias, r, out);
                r += 1;
            }
        }
    }
}

/// Whether `taps` are a 3 x 3 window read at stride 1 along both axes
/// (MobileNet's unstrided depthwise layers): tap `(ki, kj)` at
/// `offsets[0] + ki * row_step + kj`.
#[cfg(target_arch = "x86_64")]
fn is_3x3_unit_stride(taps: DepthwiseTaps<'_>) -> bool {
    let first = taps.offsets.first().copied().unwrap_or(0);
    taps.offsets.len() == 9
        && (0..9).all(|p| taps.offsets[p] == first + (p / 3) * taps.row_step + p % 3)
}

/// [`plane`] for a 3 x 3 window at stride 1 ([`is_3x3_unit_stride`]):
/// `R` output rows of `S` registers at a time, each input row's three
/// loads (one a column of the window) shared by every output row that
/// reads it, the nine weights held in registers. Tap by tap, each load
/// served one row, and two loads in three span two cache lines: the
/// general loop ran MobileNet's 75 x 75 layer at about half the rate of
/// its multiplies and adds. Each output still sums its taps in order,
/// so the bits are [`plane`]'s. In MobileNet-SSD on one Zen 4 core
/// (2026-12-01, three alternating runs, ms), AVX-512 with 4 rows of 2
/// registers: conv3/dw (128 x 75 x 75) 0.47-0.49 -> 0.40-0.45, conv5/dw
/// (256 x 38 x 38) 0.24-0.25 -> 0.19-0.22; AVX2 with 2 rows of 2 (4 rows
/// of 1 ran level or slower): 0.41-0.44 -> 0.39-0.40, 0.24-0.26 -> 0.23;
/// conv1/dw, whose 150 x 150 planes come from memory, level.
///
/// # Safety
/// As [`plane`], with taps that [`is_3x3_unit_stride`] takes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn plane_3x3<L: Lanes, const R: usize, const S: usize, const RECTIFY: bool>(
    input: *const f32,
    taps: DepthwiseTaps<'_>,
    weights: &[f32],
    bias: L::V,
    out: *mut f32,
) {
    // SAFETY: `L`'s instructions are enabled, and `weights` holds a
    // weight a tap (caller).
    let w: [L::V; 9] = std::array::from_fn(|p| unsafe { L::splat(weights[p]) });
    // SAFETY: tap 0 of output row 0 is inside the input (caller).
    let input = unsafe { input.add(taps.offsets[0]) };
    let mut r = 0;
    while r + R <= taps.rows {
        // SAFETY: rows r..r + R are the plane's.
        unsafe { rows_3x3::<L, R, S, RECTIFY>(input, taps, &w, bias, r, out) };
        r += R;
    }
    while r < taps.rows {
        // SAFETY: row r is the plane's.
        unsafe { rows_3x3::<L, 1, S, RECTIFY>(input, taps, &w, bias, r, out) };
        r += 1;
    }
}

/// Output rows `r..r + R` of [`plane_3x3`], whose input rows start
/// `row_step` apart from `input` (tap (0, 0) of output (0, 0)): `S`
/// registers of each row at a time, then one at a time, the last masked
/// to the row's end.
///
/// # Safety
/// As [`plane_3x3`], and `r + R <= taps.rows`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rows_3x3<L: Lanes, const R: usize, const S: usize, const RECTIFY: bool>(
    input: *const f32,
    taps: DepthwiseTaps<'_>,
    w: &[L::V; 9],
    bias: L::V,
    r: usize,
    out: *mut f32,
) {
    let columns = taps.columns;
    // SAFETY: the outputs' rows are inside `out` (caller).
    let dsts: [*mut f32; R] = std::array::from_fn(|i| unsafe { out.add((r + i) * columns) });
    // SAFETY: row r's first read is inside the input (caller).
    let first = unsafe { input.add(r * taps.row_step) };
    let mut q = 0;
    while q + S * L::N <= columns {
        // SAFETY: these reads lie inside `reach` (caller).
        let acc = unsafe { sums_3x3::<L, R, S>(first, taps.row_step, q, w) };
        for (acc, dst) in acc.iter().zip(dsts) {
            for (s, acc) in acc.iter().enumerate() {
                // SAFETY: the whole register is inside this row.
                unsafe { L::store(dst.add(q + L::N * s), finish::<L, RECTIFY>(*acc, bias)) };
            }
        }
        q += S * L::N;
    }
    while q < columns {
        // SAFETY: a whole register from q < columns reads inside `reach`,
        // which rounds each row up to the widest register (caller).
        let acc = unsafe { sums_3x3::<L, R, 1>(first, taps.row_step, q, w) };
        // SAFETY: as above.
        let mask = unsafe { L::first((columns - q).min(L::N)) };
        for (acc, dst) in acc.iter().zip(dsts) {
            // SAFETY: the mask writes this row's outputs from q on.
            unsafe { L::store_masked(mask, dst.add(q), finish::<L, RECTIFY>(acc[0], bias)) };
        }
        q += L::N;
    }
}

/// `S` registers from column `q` of each of `R` output rows of a 3 x 3
/// window at stride 1, input row `i` at `first + i * row_step`: each
/// input row's register at each of the window's columns loaded once and
/// multiplied into every output row that reads it, in the order of the
/// taps (row of the window, then column), product rounded, then added.
///
/// # Safety
/// `L`'s instructions are enabled; the `R + 2` rows' reads up to column
/// `q + 2 + S * L::N` are inside the input.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sums_3x3<L: Lanes, const R: usize, const S: usize>(
    first: *const f32,
    row_step: usize,
    q: usize,
    w: &[L::V; 9],
) -> [[L::V; S]; R] {
    const {
        assert!(
            R <= 4,
            "the six input rows below serve at most four output rows"
        )
    };
    // SAFETY: the caller has `L`.
    let mut acc = [[unsafe { L::zero() }; S]; R];
    let at = (first, row_step, q);
    // One call an input row, each its own constant, so that every test
    // of which output rows read it folds away (as a loop, they stayed).
    // SAFETY: as the caller promises.
    unsafe {
        input_row_3x3::<L, R, S, 0>(&mut acc, at, w);
        input_row_3x3::<L, R, S, 1>(&mut acc, at, w);
        input_row_3x3::<L, R, S, 2>(&mut acc, at, w);
        input_row_3x3::<L, R, S, 3>(&mut acc, at, w);
        input_row_3x3::<L, R, S, 4>(&mut acc, at, w);
        input_row_3x3::<L, R, S, 5>(&mut acc, at, w);
    }
    acc
}

/// Input row `I` of [`sums_3x3`] (nothing past row `R + 1`): its three
/// registers a strip, each multiplied into the output rows that read it.
///
/// # Safety
/// As [`sums_3x3`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn input_row_3x3<L: Lanes, const R: usize, const S: usize, const I: usize>(
    acc: &mut [[L::V; S]; R],
    (first, row_step, q): (*const f32, usize, usize),
    w: &[L::V; 9],
) {
    if I >= R + 2 {
        return;
    }
    for kj in 0..3 {
        // SAFETY: as the caller promises.
        let x: [L::V; S] = std::array::from_fn(|s| unsafe {
            L::load(first.add(I * row_step + q + kj + L::N * s))
        });
        for (o, acc) in acc.iter_mut().enumerate() {
            // Output row o reads input row I through the window's row
            // I - o, where there is one.
            if o > I || I - o >= 3 {
                continue;
            }
            for (acc, &x) in acc.iter_mut().zip(&x) {
                // SAFETY: the caller has `L`.
                *acc = unsafe { L::add(*acc, L::mul(w[(I - o) * 3 + kj], x)) };
            }
        }
    }
}

/// Rows `r..r + R` of [`plane`]: [`STRIPS`] registers of each at a time,
/// then the registers left, the last one masked to the row's end.
///
/// # Safety
/// As [`plane`], and `r + R <= taps.rows`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rows<L: Lanes, const R: usize, const RECTIFY: bool>(
    input: *const f32,
    taps: DepthwiseTaps<'_>,
    weights: &[f32],
    bias: L::V,
    r: usize,
    out: *mut f32,
) {
    let columns = taps.columns;
    // SAFETY: the rows' reads start inside `reach` and their outputs
    // inside `out` (caller).
    let lines: [*const f32; R] =
        std::array::from_fn(|i| unsafe { input.add((r + i) * taps.row_step) });
    // SAFETY: as above.
    let dsts: [*mut f32; R] = std::array::from_fn(|i| unsafe { out.add((r + i) * columns) });
    let mut q = 0;
    while q + STRIPS * L::N <= columns {
        // SAFETY: as `sums` requires (see above).
        let acc = unsafe { sums::<L, R, STRIPS>(lines, q, taps.offsets, weights) };
        for (acc, dst) in acc.iter().zip(dsts) {
            for (s, acc) in acc.iter().enumerate() {
                // SAFETY: the whole register is inside this row.
                unsafe { L::store(dst.add(q + L::N * s), finish::<L, RECTIFY>(*acc, bias)) };
            }
        }
        q += STRIPS * L::N;
    }
    let left = (columns - q).div_ceil(L::N);
    if left == 0 {
        return;
    }
    // SAFETY: as `sums` requires (see above).
    let acc = unsafe {
        match left {
            1 => widen::<L, R, 1>(sums::<L, R, 1>(lines, q, taps.offsets, weights)),
            2 => widen::<L, R, 2>(sums::<L, R, 2>(lines, q, taps.offsets, weights)),
            3 => widen::<L, R, 3>(sums::<L, R, 3>(lines, q, taps.offsets, weights)),
            _ => sums::<L, R, STRIPS>(lines, q, taps.offsets, weights),
        }
    };
    // SAFETY: as above.
    let tail_mask = unsafe { L::first(columns % L::N) };
    for (acc, dst) in acc.iter().zip(dsts) {
        for (s, acc) in acc.iter().enumerate().take(left) {
            let at = q + L::N * s;
            // SAFETY: as above.
            let v = unsafe { finish::<L, RECTIFY>(*acc, bias) };
            if at + L::N <= columns {
                // SAFETY: the whole register is inside this row.
                unsafe { L::store(dst.add(at), v) };
            } else {
                // SAFETY: the mask writes the row's last outputs.
                unsafe { L::store_masked(tail_mask, dst.add(at), v) };
            }
        }
    }
}

/// `S` registers of outputs from column `q` of each of the `R` rows
/// whose reads start at `lines`, each summed over every tap (product
/// rounded, then added).
///
/// # Safety
/// `L`'s instructions are enabled, and `line + offsets[p] + q + L::N * S`
/// must stay inside the input for every line and tap.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sums<L: Lanes, const R: usize, const S: usize>(
    lines: [*const f32; R],
    q: usize,
    offsets: &[usize],
    weights: &[f32],
) -> [[L::V; S]; R] {
    // SAFETY: the caller has `L`.
    let mut acc = [[unsafe { L::zero() }; S]; R];
    for (&at, &w) in offsets.iter().zip(weights) {
        // SAFETY: as above; the reads stay inside the input (caller).
        unsafe {
            let w = L::splat(w);
            for (acc, line) in acc.iter_mut().zip(lines) {
                let src = line.add(at + q);
                for (s, acc) in acc.iter_mut().enumerate() {
                    let x = L::load(src.add(L::N * s));
                    *acc = L::add(*acc, L::mul(w, x));
                }
            }
        }
    }
    acc
}

/// `acc + bias`, rectified by Caffe's `ReLU` with `RECTIFY`
/// ([`finished`]).
///
/// # Safety
/// `L`'s instructions are enabled.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn finish<L: Lanes, const RECTIFY: bool>(acc: L::V, bias: L::V) -> L::V {
    let rectifier = if RECTIFY {
        Rectifier::Relu
    } else {
        Rectifier::None
    };
    // SAFETY: the caller has `L`.
    unsafe { finished::<L>(acc, bias, rectifier) }
}

/// Each row's `S` registers as [`STRIPS`] (the rest zero).
///
/// # Safety
/// `L`'s instructions are enabled.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn widen<L: Lanes, const R: usize, const S: usize>(
    acc: [[L::V; S]; R],
) -> [[L::V; STRIPS]; R] {
    // SAFETY: the caller has `L`.
    let mut all = [[unsafe { L::zero() }; STRIPS]; R];
    for (all, acc) in all.iter_mut().zip(&acc) {
        all[..S].copy_from_slice(acc);
    }
    all
}

/// Where [`depthwise_interleaved`] reads: output `(r, q)` reads tap `p`
/// at pixel `offsets[p] + r * row_step + q * column_step` of the
/// interleaved input, 16 channels a pixel.
#[derive(Clone, Copy, Debug)]
pub struct InterleavedTaps<'a> {
    /// Each tap's pixel for output (0, 0).
    pub offsets: &'a [usize],
    /// Pixels between the reads of consecutive output rows (a padded
    /// row's width times the stride).
    pub row_step: usize,
    /// Pixels between the reads of consecutive outputs of a row (the
    /// stride).
    pub column_step: usize,
    /// Output rows and columns.
    pub rows: usize,
    /// Outputs a row.
    pub columns: usize,
}

impl InterleavedTaps<'_> {
    /// How many pixels of the input the reads reach.
    ///
    /// ```
    /// use blob_kernels::cpu::InterleavedTaps;
    /// let taps = InterleavedTaps { offsets: &[0, 1], row_step: 6, column_step: 2, rows: 2, columns: 2 };
    /// assert_eq!(taps.reach(), 1 + 6 + 2 + 1);
    /// ```
    pub fn reach(&self) -> usize {
        if self.rows == 0 || self.columns == 0 {
            return 0;
        }
        self.offsets.iter().max().copied().unwrap_or(0)
            + (self.rows - 1) * self.row_step
            + (self.columns - 1) * self.column_step
            + 1
    }
}

/// Outputs of a row summed together in [`depthwise_interleaved`], so that
/// each tap's adds are independent of the previous tap's for a while.
#[cfg(target_arch = "x86_64")]
const PIXELS: usize = 4;

/// [`depthwise_plane`] for 16 channels at once, laid side by side as
/// [`interleave_runs`](super::interleave_runs) lays them (`input[pixel *
/// 16 + l]` is channel `l`'s value), for planes too narrow for a register
/// along their rows (MobileNet's 10 x 10 and 20 x 20 layers):
/// `out[o * 16 + l]` is `bias[l]` plus the sum over taps `p`, in order,
/// of `weights[p * 16 + l]` times the tap's input of channel `l`, each
/// product rounded and then added, the bias last, as the plain loop and
/// [`depthwise_plane`] compute it, so the same bits; with `rectify`,
/// each output then through Caffe's `ReLU` ([`relu`]). Says whether it
/// ran (`false`: neither AVX-512 nor AVX2, nothing written).
///
/// ```
/// use blob_kernels::cpu::{InterleavedTaps, depthwise_interleaved};
/// // A 1 x 2 window along a 1 x 3 row, 16 channels: channel l holds l + 1.
/// let input: Vec<f32> = (0..3).flat_map(|_| (1..=16).map(|l| l as f32)).collect();
/// let weights: Vec<f32> = [1.0f32, 10.0].iter().flat_map(|&w| [w; 16]).collect();
/// let taps = InterleavedTaps { offsets: &[0, 1], row_step: 3, column_step: 1, rows: 1, columns: 2 };
/// let mut out = vec![0.0f32; 2 * 16];
/// if depthwise_interleaved(&input, taps, &weights, &[0.5; 16], false, &mut out) {
///     assert_eq!(out[16 + 2], 3.0 + 30.0 + 0.5); // output 1, channel 2
/// }
/// ```
///
/// # Panics
/// If `input` holds fewer than [`InterleavedTaps::reach`] pixels,
/// `weights` fewer than 16 a tap, or `out` fewer than the plane's pixels.
#[track_caller]
pub fn depthwise_interleaved(
    input: &[f32],
    taps: InterleavedTaps<'_>,
    weights: &[f32],
    bias: &[f32; 16],
    rectify: bool,
    out: &mut [f32],
) -> bool {
    const L16: usize = super::INTERLEAVED_LANES;
    assert!(
        input.len() >= taps.reach() * L16
            && weights.len() >= taps.offsets.len() * L16
            && out.len() >= taps.rows * taps.columns * L16,
        "depthwise_interleaved: {} x {} outputs of {} taps need {} input pixels, {} weights \
         and {} output values, got {}, {} and {}",
        taps.rows,
        taps.columns,
        taps.offsets.len(),
        taps.reach(),
        taps.offsets.len() * L16,
        taps.rows * taps.columns * L16,
        input.len(),
        weights.len(),
        out.len()
    );
    #[cfg(target_arch = "x86_64")]
    return on_lanes!(|L| {
        // SAFETY: the assert above proves every read (pixels below
        // `reach`, weights below taps x 16) and write inside the slices.
        unsafe {
            let (input, weights) = (input.as_ptr(), weights.as_ptr());
            let (bias, out) = (bias.as_ptr(), out.as_mut_ptr());
            if rectify {
                interleaved::<L, true>(input, taps, weights, bias, out)
            } else {
                interleaved::<L, false>(input, taps, weights, bias, out)
            }
        }
    })
    .is_some();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`depthwise_interleaved`] in registers of `L`: a pixel's 16 channels
/// in `16 / L::N` registers, all summed together (AVX2's two halves of
/// a pixel, each run through the plane on its own, had four sums in
/// flight: MobileNet's 19 x 19 layers ran 1.4x slower than AVX-512's).
///
/// # Safety
/// `L`'s instructions are enabled; the slices behind the pointers are
/// as [`depthwise_interleaved`] checks them.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn interleaved<L: Lanes, const RECTIFY: bool>(
    input: *const f32,
    taps: InterleavedTaps<'_>,
    weights: *const f32,
    bias: *const f32,
    out: *mut f32,
) {
    const L16: usize = super::INTERLEAVED_LANES;
    debug_assert!(
        L::N == L16 || 2 * L::N == L16,
        "a pixel in one or two registers"
    );
    // SAFETY: as the caller promises.
    unsafe {
        if 2 * L::N == L16 {
            interleaved_parts::<L, 2, RECTIFY>(input, taps, weights, bias, out)
        } else {
            interleaved_parts::<L, 1, RECTIFY>(input, taps, weights, bias, out)
        }
    }
}

/// [`interleaved`] for the `P` registers of each pixel from lane 0 of
/// `input`'s, `weights`', `bias`' and `out`'s pixels (16 values apart).
///
/// # Safety
/// As [`interleaved`], `P * L::N <= 16`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn interleaved_parts<L: Lanes, const P: usize, const RECTIFY: bool>(
    input: *const f32,
    taps: InterleavedTaps<'_>,
    weights: *const f32,
    bias: *const f32,
    out: *mut f32,
) {
    let columns = taps.columns;
    // SAFETY: `P * L::N <= 16`: inside the bias.
    let bias: [L::V; P] = std::array::from_fn(|i| unsafe { L::load(bias.add(i * L::N)) });
    if let Some(pitch) = window_3x3_pitch(taps.offsets) {
        // SAFETY: as the caller promises; the window is 3 x 3.
        unsafe {
            match taps.column_step {
                1 => interleaved_3x3::<L, P, 1, RECTIFY>((input, taps, pitch), weights, bias, out),
                2 => interleaved_3x3::<L, P, 2, RECTIFY>((input, taps, pitch), weights, bias, out),
                _ => interleaved_3x3::<L, P, 0, RECTIFY>((input, taps, pitch), weights, bias, out),
            }
        }
        return;
    }
    let input = (input, taps);
    for r in 0..taps.rows {
        let mut q = 0;
        while q + PIXELS <= columns {
            // SAFETY: L is enabled; the strip's reads are below
            // `reach` and its writes inside row r (caller).
            unsafe { strip::<L, PIXELS, P, RECTIFY>(input, weights, bias, (r, q), out) };
            q += PIXELS;
        }
        while q < columns {
            // SAFETY: as above.
            unsafe { strip::<L, 1, P, RECTIFY>(input, weights, bias, (r, q), out) };
            q += 1;
        }
    }
}

/// The distance between a 3 x 3 window's rows, where `offsets` are such
/// a window's taps (undilated, row by row), one pixel apart along each
/// row: the windows [`interleaved_3x3`] takes.
#[cfg(target_arch = "x86_64")]
fn window_3x3_pitch(offsets: &[usize]) -> Option<usize> {
    let pitch = *offsets.get(3)?;
    let window = (0..3).flat_map(|ki| (0..3).map(move |kj| ki * pitch + kj));
    (offsets.len() == 9 && pitch >= 3 && window.eq(offsets.iter().copied())).then_some(pitch)
}

/// [`interleaved_parts`] for a 3 x 3 window whose rows lie `pitch`
/// pixels apart and whose outputs step `CS` pixels along a row (0: the
/// step `taps` gives, one output at a time): the nine taps' weights
/// loaded once, and [`PIXELS`] outputs of a row at a time reading each
/// pixel of their window rows once (six pixels a row at stride 1, nine
/// at stride 2, where every output loading its own nine took twelve
/// and eighteen).
///
/// # Safety
/// As [`interleaved_parts`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn interleaved_3x3<L: Lanes, const P: usize, const CS: usize, const RECTIFY: bool>(
    (input, taps, pitch): (*const f32, InterleavedTaps<'_>, usize),
    weights: *const f32,
    bias: [L::V; P],
    out: *mut f32,
) {
    const L16: usize = super::INTERLEAVED_LANES;
    // SAFETY: the weights hold nine taps of 16 (caller), and `L` is
    // enabled.
    let w: [[L::V; P]; 9] = unsafe {
        let mut w = [[L::zero(); P]; 9];
        for (p, w) in w.iter_mut().enumerate() {
            for (i, w) in w.iter_mut().enumerate() {
                *w = L::load(weights.add(p * L16 + i * L::N));
            }
        }
        w
    };
    let window = (input, taps, pitch);
    for r in 0..taps.rows {
        let mut q = 0;
        if CS > 0 {
            while q + PIXELS <= taps.columns {
                // SAFETY: as the caller promises: the outputs' reads lie
                // below `reach`, their writes inside row r.
                unsafe { strip_3x3::<L, PIXELS, P, CS, RECTIFY>(window, &w, bias, (r, q), out) };
                q += PIXELS;
            }
        }
        while q < taps.columns {
            // SAFETY: as above.
            unsafe { strip_3x3::<L, 1, P, 1, RECTIFY>(window, &w, bias, (r, q), out) };
            q += 1;
        }
    }
}

/// `S` outputs of row `r` from column `q` of [`interleaved_3x3`], `CS`
/// pixels apart (one output alone at any step): the pixels of each
/// window row that they read, `(S - 1) CS + 3` of them, loaded once and
/// multiplied into every output that reads them, each output's taps in
/// order (row of the window, then column), product rounded, then added;
/// stored with the bias, as [`strip`] stores.
///
/// # Safety
/// As [`interleaved_3x3`], for these outputs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn strip_3x3<
    L: Lanes,
    const S: usize,
    const P: usize,
    const CS: usize,
    const RECTIFY: bool,
>(
    (input, taps, pitch): (*const f32, InterleavedTaps<'_>, usize),
    w: &[[L::V; P]; 9],
    bias: [L::V; P],
    (r, q): (usize, usize),
    out: *mut f32,
) {
    const L16: usize = super::INTERLEAVED_LANES;
    const MOST: usize = (PIXELS - 1) * 2 + 3;
    let reach = (S - 1) * CS + 3;
    debug_assert!(reach <= MOST, "a window row of at most {MOST} pixels");
    // SAFETY: as the caller promises.
    unsafe {
        let mut acc = [[L::zero(); P]; S];
        let first = r * taps.row_step + q * taps.column_step;
        for ki in 0..3 {
            let row = input.add((first + ki * pitch) * L16);
            for i in 0..P {
                let mut pixels = [L::zero(); MOST];
                for (x, pixel) in pixels.iter_mut().take(reach).enumerate() {
                    *pixel = L::load(row.add(x * L16 + i * L::N));
                }
                window_row::<L, P, S, MOST>(&mut acc, &pixels, &w[ki * 3..][..3], (i, CS));
            }
        }
        for (j, acc) in acc.iter().enumerate() {
            let o = out.add((r * taps.columns + q + j) * L16);
            for (i, acc) in acc.iter().enumerate() {
                L::store(o.add(i * L::N), finish::<L, RECTIFY>(*acc, bias[i]));
            }
        }
    }
}

/// One row of a 3 x 3 window into `S` outputs' sums, register `i` of
/// each: output `j` reads `pixels[j * step + kj]` for the row's taps
/// `kj` in order, each product rounded, then added.
///
/// # Safety
/// `L`'s instructions are enabled; `(S - 1) step + 3 <= M`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn window_row<L: Lanes, const P: usize, const S: usize, const M: usize>(
    acc: &mut [[L::V; P]; S],
    pixels: &[L::V; M],
    w: &[[L::V; P]],
    (i, step): (usize, usize),
) {
    for (kj, w) in w.iter().enumerate() {
        for (j, acc) in acc.iter_mut().enumerate() {
            // SAFETY: the caller has `L`.
            acc[i] = unsafe { L::add(acc[i], L::mul(w[i], pixels[j * step + kj])) };
        }
    }
}

/// `S` outputs of row `r` from column `q`, `P` registers of each from
/// lane 0 of the pixels, summed tap by tap in registers and stored with
/// the bias.
///
/// # Safety
/// As [`interleaved_parts`], for these outputs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn strip<L: Lanes, const S: usize, const P: usize, const RECTIFY: bool>(
    (input, taps): (*const f32, InterleavedTaps<'_>),
    weights: *const f32,
    bias: [L::V; P],
    (r, q): (usize, usize),
    out: *mut f32,
) {
    const L16: usize = super::INTERLEAVED_LANES;
    // SAFETY: as the caller promises.
    unsafe {
        let mut acc = [[L::zero(); P]; S];
        let first = r * taps.row_step + q * taps.column_step;
        for (p, &at) in taps.offsets.iter().enumerate() {
            let w: [L::V; P] = std::array::from_fn(|i| L::load(weights.add(p * L16 + i * L::N)));
            for (j, acc) in acc.iter_mut().enumerate() {
                let pixel = input.add((at + first + j * taps.column_step) * L16);
                for (i, acc) in acc.iter_mut().enumerate() {
                    let x = L::load(pixel.add(i * L::N));
                    *acc = L::add(*acc, L::mul(w[i], x));
                }
            }
        }
        for (j, acc) in acc.iter().enumerate() {
            let o = out.add((r * taps.columns + q + j) * L16);
            for (i, acc) in acc.iter().enumerate() {
                L::store(o.add(i * L::N), finish::<L, RECTIFY>(*acc, bias[i]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::relu;

    /// The plain loop: each output's taps in order, product then add.
    fn reference(input: &[f32], taps: DepthwiseTaps<'_>, weights: &[f32], bias: f32) -> Vec<f32> {
        let mut out = Vec::new();
        for r in 0..taps.rows {
            for q in 0..taps.columns {
                let mut acc = 0.0f32;
                for (&at, &w) in taps.offsets.iter().zip(weights) {
                    acc += w * input[at + r * taps.row_step + q];
                }
                out.push(acc + bias);
            }
        }
        out
    }

    #[test]
    fn planes_give_the_plain_loops_bits() {
        let mut seed = 11u32;
        let mut value = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        // (rows, columns, row length, stride, window): whole groups of
        // four registers, one to three left, a tail of every length,
        // fewer columns than a register, 1 x 1 and 5 x 5 windows.
        let cases = [
            (3, 150, 168, 1, 3),
            (2, 64, 80, 1, 3),
            (4, 19, 37, 1, 3),
            (5, 38, 58, 2, 3),
            (3, 1, 17, 1, 1),
            (2, 7, 25, 1, 5),
            (1, 113, 131, 1, 2),
            (2, 48, 66, 2, 3),
        ];
        for (rows, columns, row, stride, k) in cases {
            let offsets: Vec<usize> = (0..k)
                .flat_map(|i| (0..k).map(move |j| i * row + j))
                .collect();
            let taps = DepthwiseTaps {
                offsets: &offsets,
                row_step: stride * row,
                rows,
                columns,
            };
            let input: Vec<f32> = (0..taps.reach()).map(|_| value()).collect();
            let weights: Vec<f32> = (0..k * k).map(|_| value()).collect();
            let mut out = vec![f32::NAN; rows * columns + 5];
            let ran = depthwise_plane(&input, taps, &weights, 0.25, false, &mut out);
            if !ran {
                assert!(
                    out.iter().all(|v| v.is_nan()),
                    "nothing written without AVX-512 or AVX2"
                );
                continue;
            }
            let want = reference(&input, taps, &weights, 0.25);
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&out[..rows * columns]),
                bits(&want),
                "{rows} x {columns}"
            );
            assert!(
                out[rows * columns..].iter().all(|v| v.is_nan()),
                "wrote past the plane"
            );
        }
    }

    /// Each channel of 16 side by side gives the plain loop's bits: 3 x 3
    /// windows at strides 1, 2 and 3 (groups of four outputs and the
    /// ones left, rows of fewer than four), a dilated 3 x 3 and a 5 x 5
    /// (taps read one by one).
    #[test]
    fn interleaved_channels_give_the_plain_loops_bits() {
        let mut value = super::super::window_3x3_checks::values(5);
        // (rows, columns, padded row, stride, window, dilation)
        let cases = [
            (3, 19, 21, 1, 3, 1),
            (2, 10, 21, 2, 3, 1),
            (4, 3, 5, 1, 3, 1),
            (3, 13, 27, 2, 3, 1),
            (2, 6, 20, 3, 3, 1),
            (2, 9, 13, 1, 3, 2),
            (2, 5, 9, 1, 5, 1),
        ];
        for (rows, columns, row, stride, k, dilation) in cases {
            let offsets: Vec<usize> = (0..k)
                .flat_map(|i| (0..k).map(move |j| (i * row + j) * dilation))
                .collect();
            let taps = InterleavedTaps {
                offsets: &offsets,
                row_step: stride * row,
                column_step: stride,
                rows,
                columns,
            };
            let input: Vec<f32> = (0..taps.reach() * LANES).map(|_| value()).collect();
            let weights: Vec<f32> = (0..k * k * LANES).map(|_| value()).collect();
            let bias: [f32; LANES] = std::array::from_fn(|_| value());
            for rectify in [false, true] {
                let mut out = vec![f32::NAN; (rows * columns + 1) * LANES];
                if !depthwise_interleaved(&input, taps, &weights, &bias, rectify, &mut out) {
                    return;
                }
                let mut want = Vec::new();
                for o in 0..rows * columns {
                    let first = o / columns * taps.row_step + o % columns * stride;
                    for l in 0..LANES {
                        let mut acc = 0.0f32;
                        for (p, &at) in offsets.iter().enumerate() {
                            let x = std::hint::black_box(input[(first + at) * LANES + l]);
                            acc += weights[p * LANES + l] * x;
                        }
                        let v = acc + bias[l];
                        want.push(if rectify { relu(v) } else { v }.to_bits());
                    }
                }
                let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                let what =
                    format!("{rows} x {columns}, stride {stride}, {k} x {k}, dilation {dilation}");
                assert_eq!(got[..want.len()], want, "{what}");
                assert!(
                    out[want.len()..].iter().all(|v| v.is_nan()),
                    "{what}: wrote past"
                );
            }
        }
    }

    /// With `rectify`, each output is [`relu`] of the plain one, bit for
    /// bit (run time's, not the compiler's folding), -inf, NaN and
    /// negatives among them, in both kernels.
    #[test]
    fn rectified_outputs_are_relus_bits() {
        let specials = [
            f32::NEG_INFINITY,
            f32::NAN,
            -0.0,
            0.0,
            f32::INFINITY,
            -3.0,
            2.0,
        ];
        // A 1 x 1 window of weight 1 over a 1 x 40 row, bias 0: the
        // output is the input.
        let mut input = vec![0.0f32; 40 + LANES];
        for (i, v) in input.iter_mut().take(40).enumerate() {
            *v = specials[i % specials.len()] * if i % 3 == 0 { 1.0 } else { 0.5 };
        }
        let taps = DepthwiseTaps {
            offsets: &[0],
            row_step: 40,
            rows: 1,
            columns: 40,
        };
        let relu_now = |v: f32| relu(std::hint::black_box(v)).to_bits();
        let mut plain = vec![0.0f32; 40];
        if !depthwise_plane(&input, taps, &[1.0], 0.0, false, &mut plain) {
            return;
        }
        let want: Vec<u32> = plain.iter().map(|&v| relu_now(v)).collect();
        let mut out = vec![0.0f32; 40];
        if depthwise_plane(&input, taps, &[1.0], 0.0, true, &mut out) {
            let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "depthwise_plane");
        }
        // The same values as 16 channels of 40 / 16 pixels, interleaved.
        let pixels = input[..32].to_vec();
        let taps = InterleavedTaps {
            offsets: &[0],
            row_step: 2,
            column_step: 1,
            rows: 1,
            columns: 2,
        };
        let mut out = vec![0.0f32; 32];
        if depthwise_interleaved(&pixels, taps, &[1.0; 16], &[0.0; 16], true, &mut out) {
            let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want[..32], "depthwise_interleaved");
        }
    }

    #[test]
    #[should_panic(expected = "need an input of")]
    fn a_short_input_is_refused() {
        let taps = DepthwiseTaps {
            offsets: &[0, 1, 2],
            row_step: 20,
            rows: 2,
            columns: 3,
        };
        depthwise_plane(&[0.0; 37], taps, &[1.0; 3], 0.0, false, &mut [0.0; 6]);
    }
}
