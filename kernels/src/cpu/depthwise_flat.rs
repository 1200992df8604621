//! Narrow planes of a 3 x 3 depthwise convolution at stride 1 with a row
//! and a column of zeros around each (MobileNet's unstrided depthwise
//! layers at 19 x 19 and 10 x 10, Caffe's `Convolution` with `group` =
//! channels, `kernel_size: 3`, `pad: 1`), on AVX-512 and on AVX2 + FMA,
//! each plane computed as one run of `height * width` outputs.
//!
//! Row by row, a 19-wide row lights 19 of two registers' 32 lanes; with
//! 16 channels laid side by side instead ([`super::depthwise_interleaved`])
//! every lane works, but the transposes into and out of that layout took
//! 45% of MobileNet-SSD's 512 x 19 x 19 layers. Read as one run, a
//! register's 16 outputs may span two rows, yet each of the window's
//! taps is still one load at a fixed distance (`width` a row of the
//! window): only the window's left and right columns wrap to the row
//! before or after at the plane's edges, and those lanes are zeroed, as
//! the padding would be.

#[cfg(target_arch = "x86_64")]
use super::depthwise::finish;
#[cfg(target_arch = "x86_64")]
use super::lanes::{Lanes, on_lanes};
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};

/// `out[r][q] = bias + sum` for each of the `biases.len()` planes of
/// `height x width` (one after another in `input` and in `out`), the sum
/// over the window's rows `ki` and columns `kj` in order of
/// `weights[9 plane + 3 ki + kj] * input[r + ki - 1][q + kj - 1]`, zeros
/// outside the plane, each product rounded and then added (the bits of
/// [`super::depthwise_plane`] over a padded copy): Caffe's depthwise
/// `Convolution` (`group` = channels, `kernel_size: 3`, `pad: 1`) on
/// those channels. With `rectify`, each output then goes through Caffe's
/// `ReLU` (its bits: [`super::relu`]) as it is stored. Says whether it
/// ran (`false`: neither AVX-512 nor AVX2, and nothing was written).
///
/// ```
/// use blob_kernels::cpu::depthwise_3x3_flat;
/// // One 2 x 3 plane, the window's centre and right column of its
/// // middle row: each output plus its right neighbour.
/// let input = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
/// let mut weights = [0.0f32; 9];
/// weights[4] = 1.0;
/// weights[5] = 1.0;
/// let mut out = [0.0f32; 6];
/// if depthwise_3x3_flat(&input, (2, 3), &weights, &[0.5], false, &mut out) {
///     assert_eq!(out, [3.5, 5.5, 3.5, 9.5, 11.5, 6.5]);
/// }
/// ```
///
/// # Panics
/// If `input` or `out` holds fewer than `biases.len() * height * width`
/// values, or `weights` fewer than 9 a plane.
#[track_caller]
pub fn depthwise_3x3_flat(
    input: &[f32],
    (height, width): (usize, usize),
    weights: &[f32],
    biases: &[f32],
    rectify: bool,
    out: &mut [f32],
) -> bool {
    let (planes, plane) = (biases.len(), height * width);
    assert!(
        input.len() >= planes * plane && weights.len() >= 9 * planes && out.len() >= planes * plane,
        "depthwise_3x3_flat: {planes} planes of {height} x {width} need an input and an \
         output of {} and {} weights, got {}, {} and {}",
        planes * plane,
        9 * planes,
        input.len(),
        out.len(),
        weights.len()
    );
    if planes * plane == 0 {
        return super::isa() >= super::Isa::Avx2;
    }
    #[cfg(target_arch = "x86_64")]
    return on_lanes!(|L| {
        let run = Run::new::<L>(height, width);
        // Two padded copies in turn, the next plane's ends copied before
        // this plane is read: a plane's taps, read straight after the
        // copy's stores, waited for them (loads that span two stores
        // are not forwarded). MobileNet's 1024 x 10 x 10 layer alone, one
        // Zen 5 core, AVX-512, 3 alternating runs: 0.037 -> 0.032 ms; in
        // MobileNet-SSD (medians of 5) 0.0425 -> 0.0376, AVX2 0.0486 ->
        // 0.0460; at 19 x 19 level.
        let mut padded = [vec![0.0f32; run.padded_len], vec![0.0f32; run.padded_len]];
        let planes_in = || input.chunks_exact(plane).take(planes);
        run.copy_ends(&input[..plane], &mut padded[0]);
        let mut ahead = planes_in().skip(1);
        for (p, (((x, y), w), &bias)) in planes_in()
            .zip(out.chunks_exact_mut(plane))
            .zip(weights.chunks_exact(9))
            .zip(biases)
            .enumerate()
        {
            let [even, odd] = &mut padded;
            let (this, next) = if p % 2 == 0 { (even, odd) } else { (odd, even) };
            if let Some(next_plane) = ahead.next() {
                run.copy_ends(next_plane, next);
            }
            // Past the last planes, beyond the input: a prefetch reads
            // nothing, wherever it points.
            let later = x.as_ptr().wrapping_add(PLANES_AHEAD * plane);
            let sources = (this.as_ptr(), x.as_ptr(), later);
            // SAFETY: `this` holds the margins around the plane and a
            // register past its run (`Run::new`), its ends as `x` has
            // them; the keeps a register past the outputs' run, `y` the
            // plane's outputs.
            unsafe {
                if rectify {
                    flat_plane::<L, true>(&run, sources, w, bias, y.as_mut_ptr());
                } else {
                    flat_plane::<L, false>(&run, sources, w, bias, y.as_mut_ptr());
                }
            }
        }
    })
    .is_some();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// How many planes after the one it computes [`flat_plane`] asks for,
/// a line of that plane's input for each of its own: a layer may read a
/// feature map written several layers (megabytes) before, beyond L2,
/// and each plane's 25 lines (20 x 20) came in turn as its loads missed.
/// MobileNet-YOLOv3-lite's conv17/dw (512 x 20 x 20) reads conv11's
/// output across six layers; one Zen 4 core (2026-12-05, medians of
/// 7-8 alternating runs, ms): 0.149-0.164 -> 0.098 (AVX2 0.193 ->
/// 0.119; two threads 0.083 -> 0.056), the depthwise layers that read
/// the layer just before level (alone, 512 x 19 x 19 0.082 -> 0.082,
/// 1024 x 10 x 10 0.054 -> 0.054); the pass within the day's noise of
/// 2%. A whole plane asked for at once instead (one, two and four
/// planes ahead): conv17/dw 0.110, 0.102 and 0.101, the layers that
/// read the layer before 3-5% slower.
#[cfg(target_arch = "x86_64")]
const PLANES_AHEAD: usize = 2;

/// A plane's geometry as the kernel reads it, shared by every plane.
#[cfg(target_arch = "x86_64")]
struct Run {
    width: usize,
    /// Outputs a plane.
    outputs: usize,
    /// Zeros before the plane in the padded copy: at least a row and a
    /// value (the window's top-left tap of the first output).
    margin: usize,
    /// The padded copy's length: the margin, the plane rounded up to
    /// whole registers, and a row, a value and a register past it.
    padded_len: usize,
    /// All ones where an output's left neighbour is in its row, zeros at
    /// the row's first column (the window's left column reads the
    /// padding there), a register past the outputs.
    keep_left: Vec<f32>,
    /// The same for the right neighbour, zeros at each row's last column.
    keep_right: Vec<f32>,
    /// The values at each end of the plane that the registers reading
    /// past its ends read: up to a row and a value past the reach of
    /// four registers from the first output that reads in place, and as
    /// many at the end.
    edge: usize,
}

#[cfg(target_arch = "x86_64")]
impl Run {
    fn new<L: Lanes>(height: usize, width: usize) -> Run {
        let outputs = height * width;
        let whole = outputs.next_multiple_of(L::N);
        let keep = |edge: usize| -> Vec<f32> {
            (0..whole)
                .map(|f| f32::from_bits(if f % width == edge { 0 } else { !0 }))
                .collect()
        };
        let margin = width + 1;
        Run {
            width,
            outputs,
            margin,
            padded_len: margin + whole + width + 1 + L::N,
            keep_left: keep(0),
            keep_right: keep(width - 1),
            edge: margin + 4 * L::N + margin + L::N,
        }
    }

    /// Copies the ends of plane `x` that registers reading past its ends
    /// read into `padded`, between its margins of zeros (which stay: every
    /// plane writes the same places). Only the registers whose window
    /// reaches past the plane's ends read the copy
    /// ([`Run::reads_in_place`]), so only its ends are copied.
    fn copy_ends(&self, x: &[f32], padded: &mut [f32]) {
        let plane = x.len();
        if self.edge * 2 >= plane {
            padded[self.margin..][..plane].copy_from_slice(x);
        } else {
            padded[self.margin..][..self.edge].copy_from_slice(&x[..self.edge]);
            let tail = plane - self.edge;
            padded[self.margin + tail..][..self.edge].copy_from_slice(&x[tail..]);
        }
    }

    /// Whether `registers` registers of outputs from `f` read only
    /// inside the plane (a row and a value either side), and so from
    /// the input itself rather than its padded copy.
    fn reads_in_place(&self, f: usize, registers: usize, lanes: usize) -> bool {
        f >= self.margin && f + registers * lanes + self.margin <= self.outputs
    }
}

/// One plane: four registers of outputs at a time (each sums its nine
/// taps one add after another, so four chains are in flight), then one
/// at a time, the last masked to the plane's end; with each register,
/// the same values of the input at `later` are asked for
/// ([`PLANES_AHEAD`]).
///
/// # Safety
/// `L`'s instructions are enabled; `padded` holds `run.padded_len`
/// values, the plane from `run.margin`; `weights` 9; `out` the plane's
/// outputs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn flat_plane<L: Lanes, const RECTIFY: bool>(
    run: &Run,
    (padded, plane, later): (*const f32, *const f32, *const f32),
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
    // SAFETY: the plane starts `margin` in (caller).
    let copy = unsafe { padded.add(run.margin) };
    let mut f = 0;
    while f + 4 * L::N <= run.outputs {
        let first = if run.reads_in_place(f, 4, L::N) {
            plane
        } else {
            copy
        };
        // SAFETY: reads reach a row and a value either side of the
        // outputs' run: inside the plane where it reads in place, else
        // inside the margins and the copied ends (caller).
        let acc = unsafe { sums::<L, 4>(run, first, f, &w) };
        ask_for(later.wrapping_add(f), 4 * L::N);
        for (s, acc) in acc.iter().enumerate() {
            // SAFETY: the four registers are the plane's outputs.
            unsafe { L::store(out.add(f + s * L::N), finish::<L, RECTIFY>(*acc, bias)) };
        }
        f += 4 * L::N;
    }
    while f < run.outputs {
        let first = if run.reads_in_place(f, 1, L::N) {
            plane
        } else {
            copy
        };
        // SAFETY: as above; a whole register from f < outputs stays
        // inside the margin past the plane and the keeps.
        let [acc] = unsafe { sums::<L, 1>(run, first, f, &w) };
        ask_for(later.wrapping_add(f), L::N);
        // SAFETY: as above; the mask stops at the plane's end.
        unsafe {
            let mask = L::first(run.outputs - f);
            L::store_masked(mask, out.add(f), finish::<L, RECTIFY>(acc, bias));
        }
        f += L::N;
    }
}

/// Asks for the cache lines of `values` values from `from` (any
/// address: a prefetch reads nothing).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn ask_for(from: *const f32, values: usize) {
    for at in (0..values).step_by(16) {
        // SAFETY: a prefetch reads nothing.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(from.wrapping_add(at) as *const i8) };
    }
}

/// `S` registers of outputs from `f` on: each tap one load at `f` plus
/// the tap's distance (a row of the window `width`), the window's left
/// and right columns anded with the keeps, in the order of the taps,
/// product rounded, then added.
///
/// # Safety
/// `L`'s instructions are enabled; `first` is the plane's start in a
/// padded copy as [`flat_plane`] has it, or in the input itself where
/// the `S` registers [read in place](Run::reads_in_place); `f + S N` at
/// most the outputs rounded up to whole registers.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sums<L: Lanes, const S: usize>(
    run: &Run,
    first: *const f32,
    f: usize,
    w: &[L::V; 9],
) -> [L::V; S] {
    // SAFETY: the caller has `L`.
    let mut acc = [unsafe { L::zero() }; S];
    for (s, acc) in acc.iter_mut().enumerate() {
        let at = f + s * L::N;
        // SAFETY: the keeps run a register past the outputs (caller).
        let (left, right) = unsafe {
            (
                L::load(run.keep_left.as_ptr().add(at)),
                L::load(run.keep_right.as_ptr().add(at)),
            )
        };
        for ki in 0..3 {
            // SAFETY: row ki - 1 of the window, a value either side,
            // lies inside the margins (caller).
            unsafe {
                let centre = first.add(at + ki * run.width).sub(run.width);
                let taps = [
                    L::and(L::load(centre.sub(1)), left),
                    L::load(centre),
                    L::and(L::load(centre.add(1)), right),
                ];
                for (kj, x) in taps.into_iter().enumerate() {
                    *acc = L::add(*acc, L::mul(w[ki * 3 + kj], x));
                }
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::super::window_3x3_checks::{assert_bits, reference, values};
    use super::*;

    #[test]
    fn planes_give_the_definitions_bits() {
        let mut value = values(5);
        // One value, a column, a row, MobileNet's 38 x 38, 19 x 19 and
        // 10 x 10 (the larger two read their middles in place, between
        // copied ends), rows longer and shorter than a register, planes
        // of whole runs of four registers and of a masked register past
        // them, a long narrow plane read in place.
        for (h, w) in [
            (1, 1),
            (5, 1),
            (1, 7),
            (38, 38),
            (19, 19),
            (10, 10),
            (30, 7),
            (3, 23),
            (8, 8),
            (4, 33),
        ] {
            let planes = 3;
            let input: Vec<f32> = (0..planes * h * w).map(|_| value()).collect();
            let weights: Vec<f32> = (0..9 * planes).map(|_| value()).collect();
            let biases: Vec<f32> = (0..planes).map(|_| value()).collect();
            let want: Vec<f32> = (0..planes)
                .flat_map(|p| {
                    let plane = &input[p * h * w..][..h * w];
                    reference(plane, (h, w), 1, &weights[9 * p..][..9], biases[p])
                })
                .collect();
            let kernel = |rectify, out: &mut [f32]| {
                depthwise_3x3_flat(&input, (h, w), &weights, &biases, rectify, out)
            };
            assert_bits(&want, kernel, &format!("{h} x {w}"));
        }
    }

    #[test]
    fn values_beyond_a_rows_edge_are_never_read_as_its_neighbours() {
        // -inf down the first column, +inf down the last: a wrapped tap
        // would add one to the other at the row's far side (NaN where the
        // definition has an infinity).
        let (h, w) = (6, 19);
        let input: Vec<f32> = (0..h * w)
            .map(|f| match f % w {
                0 => f32::NEG_INFINITY,
                q if q == w - 1 => f32::INFINITY,
                _ => 1.0,
            })
            .collect();
        let mut out = vec![0.0f32; h * w];
        if depthwise_3x3_flat(&input, (h, w), &[1.0; 9], &[0.0], false, &mut out) {
            assert!(out.iter().all(|v| !v.is_nan()), "{out:?}");
            assert_eq!(out, reference(&input, (h, w), 1, &[1.0; 9], 0.0));
        }
    }

    #[test]
    #[should_panic(expected = "2 planes of 3 x 3 need an input and an output of 18")]
    fn a_short_input_is_refused() {
        depthwise_3x3_flat(
            &[0.0; 17],
            (3, 3),
            &[0.0; 18],
            &[0.0; 2],
            false,
            &mut [0.0; 18],
        );
    }
}
