//! Shallow correlations (a net's first convolution: LeNet's 1 x 5 x 5,
//! MTCNN's 3 x 3 x 3 patches) straight from the image, on AVX-512.
//!
//! im2col copies each input value once per tap into a column buffer 25
//! times the image (LeNet's conv1), and for so shallow a product that
//! copy costs as much as the multiply-adds. Here output position `t`
//! (counted along the input's rows, so row `r` starts at `r * stride`)
//! reads the input at `t + offset` for each tap's offset, so every tap
//! is one unaligned load of 16 adjacent positions. The positions at the
//! right edge of each input row (past the output's columns) are computed
//! too and never stored: each vector is stored with one mask per output
//! row it touches, straight into the output's own rows, the bias added.
//!
//! Each output is summed over the taps in their order with one fused
//! multiply-add a tap, the weight broadcast as the gemm kernel broadcasts
//! A, and the bias added to the sum: the same operations in the same
//! order as im2col, `cpu::gemm` on AVX-512 (for a patch of up to 256
//! values) and a bias pass, so both give the same bits.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::{Isa, isa};

/// Adjacent output positions a step computes: two 16-lane registers.
const SPAN: usize = 32;

/// Values past the end of the input that a step may read (and ignore):
/// the caller pads its input with this many.
pub const CORRELATE_PAD: usize = SPAN;

/// The output of a [`correlate`] per channel: `rows` rows of `cols`
/// values, output row `r` read from the input `r * stride` positions in
/// (`stride` is the input's row length, at least `cols`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputRows {
    /// Output rows.
    pub rows: usize,
    /// Output values a row.
    pub cols: usize,
    /// Input positions from one output row to the next.
    pub stride: usize,
}

impl OutputRows {
    /// Input positions from the first output to just past the last.
    fn span(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            0
        } else {
            (self.rows - 1) * self.stride + self.cols
        }
    }
}

/// `out[c][r][q] = bias[c] + sum over taps p of weight[c][p] *
/// input[r * stride + q + offsets[p]]` for `c < channels` and the output
/// rows `at` describes, on AVX-512 (Caffe's convolution at stride 1 of a
/// padded image, as im2col and gemm compute it). `weight` holds
/// `channels` rows of `offsets.len()` values, `out` `channels` planes of
/// `rows * cols`. Says whether it ran (`false`: no AVX-512, and nothing
/// was written).
///
/// ```
/// use blob_kernels::cpu::{CORRELATE_PAD, OutputRows, correlate};
/// // Rows of 4 values, taps [1, 10] at offsets 0 and 1, a bias of 0.5:
/// // 3 outputs a row, 2 rows.
/// let mut input = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
/// input.resize(8 + CORRELATE_PAD, 0.0);
/// let at = OutputRows { rows: 2, cols: 3, stride: 4 };
/// let mut out = [0.0f32; 6];
/// if correlate(&input, &[0, 1], &[1.0, 10.0], &[0.5], 1, at, &mut out) {
///     assert_eq!(out, [21.5, 32.5, 43.5, 65.5, 76.5, 87.5]);
/// }
/// ```
///
/// # Panics
/// If `cols` exceeds `stride`, `input` is shorter than its last read (the
/// last output's position plus the largest offset, plus
/// [`CORRELATE_PAD`]), or `weight`, `bias` or `out` shorter than the
/// channels need.
pub fn correlate(
    input: &[f32],
    offsets: &[usize],
    weight: &[f32],
    bias: &[f32],
    channels: usize,
    at: OutputRows,
    out: &mut [f32],
) -> bool {
    if isa() != Isa::Avx512 {
        return false;
    }
    let taps = offsets.len();
    assert!(
        at.cols <= at.stride,
        "correlate: output rows of {} values cannot be {} input positions apart",
        at.cols,
        at.stride
    );
    let positions = at.span();
    if channels == 0 || positions == 0 {
        return true;
    }
    let reach = offsets.iter().max().copied().unwrap_or(0);
    assert!(
        input.len() >= positions.next_multiple_of(SPAN) + reach,
        "correlate: {positions} positions reaching {reach} past them read {} values, the input has {}",
        positions.next_multiple_of(SPAN) + reach,
        input.len()
    );
    let plane = at.rows * at.cols;
    assert!(
        weight.len() >= channels * taps && bias.len() >= channels && out.len() >= channels * plane,
        "correlate: {channels} channels of {taps} taps and {plane} outputs need {} weights, {channels} biases and {} outputs, got {}, {} and {}",
        channels * taps,
        channels * plane,
        weight.len(),
        bias.len(),
        out.len()
    );
    #[cfg(not(target_arch = "x86_64"))]
    return false;
    #[cfg(target_arch = "x86_64")]
    // As many channels a step as the gemm kernel takes rows a tile.
    let run = match super::sgemm_avx512::rows_per_tile(channels) {
        10 => steps::<10>,
        12 => steps::<12>,
        _ => steps::<8>,
    };
    // SAFETY: `isa` found AVX-512 F; the asserts above prove every read
    // (a step's 32 positions from a multiple of 32 below the span, plus
    // an offset) and every write (masked to the output rows, channels
    // below `channels`) inside the slices.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        run(input, offsets, (weight, bias), channels, at, out)
    };
    #[cfg(target_arch = "x86_64")]
    true
}

/// Where the 16 positions from `t` go: for each output row they touch,
/// the lanes in that row's columns and the output index of lane 0 (lanes
/// outside the mask may index outside the plane, and are never stored).
/// At most 17 rows (a stride of 1). `row` is the output row of an
/// earlier `t` (or 0), moved on to `t`'s: no division a step.
#[cfg(target_arch = "x86_64")]
fn placements(
    t: usize,
    at: OutputRows,
    row: &mut usize,
    placed: &mut [(__mmask16, isize); 17],
) -> usize {
    let span = at.span();
    while (*row + 1) * at.stride <= t {
        *row += 1;
    }
    let mut count = 0;
    let mut r = *row;
    while r < at.rows && r * at.stride < (t + 16).min(span) {
        let row_start = r * at.stride;
        let from = row_start.max(t) - t;
        let to = (row_start + at.cols)
            .min(t + 16)
            .min(span)
            .saturating_sub(t);
        if from < to {
            let mask = (((1u32 << to) - 1) & !((1u32 << from) - 1)) as __mmask16;
            let lane0 = (r * at.cols) as isize + t as isize - row_start as isize;
            placed[count] = (mask, lane0);
            count += 1;
        }
        r += 1;
    }
    count
}

#[cfg(target_arch = "x86_64")]
/// [`correlate`] with `ROWS` channels a step (channels past the last are
/// computed from its weights and not written).
///
/// # Safety
/// AVX-512 F is available, and the slices are as [`correlate`] checks.
#[target_feature(enable = "avx512f")]
unsafe fn steps<const ROWS: usize>(
    input: &[f32],
    offsets: &[usize],
    (weight, bias): (&[f32], &[f32]),
    channels: usize,
    at: OutputRows,
    out: &mut [f32],
) {
    let taps = offsets.len();
    let (positions, plane) = (at.span(), at.rows * at.cols);
    let mut placed = [[(0 as __mmask16, 0isize); 17]; 2];
    for c0 in (0..channels).step_by(ROWS) {
        let rows: [&[f32]; ROWS] =
            std::array::from_fn(|r| &weight[(c0 + r).min(channels - 1) * taps..][..taps]);
        let mut row = 0;
        for t0 in (0..positions).step_by(SPAN) {
            let counts = [0, 1].map(|half| {
                let t = t0 + 16 * half;
                if t < positions {
                    placements(t, at, &mut row, &mut placed[half])
                } else {
                    0
                }
            });
            let mut acc = [[_mm512_setzero_ps(); 2]; ROWS];
            for (p, &offset) in offsets.iter().enumerate() {
                // SAFETY: t0 + offset + 32 <= input.len(), per the caller.
                let (lo, hi) = unsafe {
                    let at = input.as_ptr().add(t0 + offset);
                    (_mm512_loadu_ps(at), _mm512_loadu_ps(at.add(16)))
                };
                for (acc, row) in acc.iter_mut().zip(&rows) {
                    // SAFETY: p < taps, the row's length.
                    let w = _mm512_set1_ps(unsafe { *row.get_unchecked(p) });
                    acc[0] = _mm512_fmadd_ps(w, lo, acc[0]);
                    acc[1] = _mm512_fmadd_ps(w, hi, acc[1]);
                }
            }
            for (r, acc) in acc.iter().enumerate().take(channels - c0) {
                let b = _mm512_set1_ps(bias[c0 + r]);
                let channel = out.as_mut_ptr().wrapping_add((c0 + r) * plane);
                for half in 0..2 {
                    let v = _mm512_add_ps(acc[half], b);
                    for &(mask, lane0) in &placed[half][..counts[half]] {
                        // SAFETY: the masked lanes are outputs of row
                        // c0 + r < channels, inside `out`, per the caller.
                        unsafe { _mm512_mask_storeu_ps(channel.wrapping_offset(lane0), mask, v) };
                    }
                }
            }
        }
    }
}
