//! Shallow correlations (a net's first convolution: LeNet's 1 x 5 x 5,
//! MTCNN's 3 x 3 x 3 patches) straight from the image, on AVX-512.
//!
//! im2col copies each input value once per tap into a column buffer 25
//! times the image (LeNet's conv1), and for so shallow a product that
//! copy costs as much as the multiply-adds. Here an output position `t`
//! of a plane laid out with the input's row length reads the input at
//! `t + offset` for each tap's offset, so every tap is one unaligned load
//! of 16 adjacent positions: the columns at the right edge (`w - ow` of
//! every row) are computed too and dropped by the caller.
//!
//! Each output is summed over the taps in their order with one fused
//! multiply-add a tap, the weight broadcast as the gemm kernel broadcasts
//! A: the same operations in the same order as im2col and
//! `cpu::gemm` on AVX-512 for a patch of up to 256 values, so both give
//! the same bits.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::{Isa, isa};

/// Adjacent output positions a step computes: two 16-lane registers.
const SPAN: usize = 32;

/// Values past the end of the input that a step may read (and ignore):
/// the caller pads its input with this many.
pub const CORRELATE_PAD: usize = SPAN;

/// `out[c][t] = sum over taps p of weight[c][p] * input[t + offsets[p]]`
/// for `c < channels` and `t < positions`, on AVX-512: `weight` holds
/// `channels` rows of `offsets.len()` values, `out` `channels` rows of
/// `positions`. Says whether it ran (`false`: no AVX-512, and nothing was
/// written).
///
/// ```
/// // A 1-D correlation of [1, 2, 3, 4] with the taps [1, 10] at offsets 0, 1.
/// let mut input = vec![1.0f32, 2.0, 3.0, 4.0];
/// input.resize(4 + blob_kernels::cpu::CORRELATE_PAD, 0.0);
/// let mut out = [0.0f32; 3];
/// if blob_kernels::cpu::correlate(&input, &[0, 1], &[1.0, 10.0], 1, 3, &mut out) {
///     assert_eq!(out, [21.0, 32.0, 43.0]);
/// }
/// ```
///
/// # Panics
/// If `input` is shorter than its last read (`positions - 1` plus the
/// largest offset, plus [`CORRELATE_PAD`]), or `weight` or `out` shorter
/// than their rows.
pub fn correlate(
    input: &[f32],
    offsets: &[usize],
    weight: &[f32],
    channels: usize,
    positions: usize,
    out: &mut [f32],
) -> bool {
    if isa() != Isa::Avx512 {
        return false;
    }
    let taps = offsets.len();
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
    assert!(
        weight.len() >= channels * taps && out.len() >= channels * positions,
        "correlate: {channels} channels of {taps} taps and {positions} positions need {} weights and {} outputs, got {} and {}",
        channels * taps,
        channels * positions,
        weight.len(),
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
    // (a step's 32 positions from a multiple of 32 below `positions`,
    // plus an offset) and every write (masked to `positions`, rows below
    // `channels`) inside the slices.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        run(input, offsets, weight, channels, positions, out)
    };
    #[cfg(target_arch = "x86_64")]
    true
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
    weight: &[f32],
    channels: usize,
    positions: usize,
    out: &mut [f32],
) {
    let taps = offsets.len();
    for c0 in (0..channels).step_by(ROWS) {
        let rows: [&[f32]; ROWS] =
            std::array::from_fn(|r| &weight[(c0 + r).min(channels - 1) * taps..][..taps]);
        for t0 in (0..positions).step_by(SPAN) {
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
            let left = positions - t0;
            let masks = [lanes(left), lanes(left.saturating_sub(16))];
            for (r, acc) in acc.iter().enumerate().take(channels - c0) {
                for (half, (&v, &mask)) in acc.iter().zip(&masks).enumerate() {
                    // SAFETY: row c0 + r < channels, and the mask keeps
                    // the positions below `positions`.
                    unsafe {
                        let at = out.as_mut_ptr().add((c0 + r) * positions + t0 + 16 * half);
                        _mm512_mask_storeu_ps(at, mask, v);
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
/// The first `n` of 16 lanes.
fn lanes(n: usize) -> __mmask16 {
    ((1u32 << n.min(16)) - 1) as __mmask16
}
