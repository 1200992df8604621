//! Runs laid side by side, one per lane, and back: the layout in which a
//! loop over many channels vectorises (Winograd's transforms work on 16
//! channels of a tile at once) while a blob keeps Caffe's planes.
//!
//! Both directions are transposes of 16 runs by the run's length; on
//! AVX-512 they move 16 x 16 blocks through registers, on AVX2 8 x 8
//! blocks, and a value is only moved, never changed, so every path gives
//! the same bits.

#[cfg(target_arch = "x86_64")]
use super::{Isa, isa};

/// Runs side by side in [`interleave_runs`]' layout: one AVX-512
/// register, two AVX2 ones.
pub const INTERLEAVED_LANES: usize = 16;

/// `lanes[x * 16 + l] = runs[l][x]` for `x < len`: up to
/// [`INTERLEAVED_LANES`] runs laid side by side, lanes past the last run
/// zero. Channel `l`'s row of an image, for 16 channels, becomes a row of
/// 16-lane vectors, one a pixel.
///
/// ```
/// use blob_kernels::cpu::{INTERLEAVED_LANES, interleave_runs};
/// let (a, b) = ([1.0f32, 2.0, 3.0], [10.0f32, 20.0, 30.0]);
/// let mut lanes = vec![f32::NAN; 3 * INTERLEAVED_LANES];
/// interleave_runs(&[&a, &b], 3, &mut lanes);
/// assert_eq!(&lanes[16..19], &[2.0, 20.0, 0.0]);
/// ```
///
/// # Panics
/// With more than 16 runs, a run shorter than `len`, or `lanes` shorter
/// than `len * 16`.
#[track_caller]
pub fn interleave_runs(runs: &[&[f32]], len: usize, lanes: &mut [f32]) {
    check(runs.len(), runs.iter().map(|r| r.len()), len, lanes.len());
    let lanes = &mut lanes[..len * INTERLEAVED_LANES];
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: `check` proved every run holds `len` values and `lanes`
        // `len * 16`; the family is there, as `isa` found.
        Isa::Avx512 => return unsafe { x86::interleave_avx512(runs, len, lanes) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { x86::interleave_avx2(runs, len, lanes) },
        Isa::Baseline => {}
    }
    for (x, pixel) in lanes.chunks_exact_mut(INTERLEAVED_LANES).enumerate() {
        for (l, v) in pixel.iter_mut().enumerate() {
            *v = runs.get(l).map_or(0.0, |run| run[x]);
        }
    }
}

/// `runs[l][x] = lanes[x * 16 + l]` for `x < len`: the reverse of
/// [`interleave_runs`], lanes past the last run unread; values of a run
/// past `len` are left as they were.
///
/// ```
/// use blob_kernels::cpu::{INTERLEAVED_LANES, deinterleave_runs};
/// let lanes: Vec<f32> = (0..2 * INTERLEAVED_LANES).map(|v| v as f32).collect();
/// let (mut a, mut b) = ([0.0f32; 3], [0.0f32; 2]);
/// deinterleave_runs(&lanes, 2, &mut [&mut a, &mut b]);
/// assert_eq!((a, b), ([0.0, 16.0, 0.0], [1.0, 17.0]));
/// ```
///
/// # Panics
/// With more than 16 runs, a run shorter than `len`, or `lanes` shorter
/// than `len * 16`.
#[track_caller]
pub fn deinterleave_runs(lanes: &[f32], len: usize, runs: &mut [&mut [f32]]) {
    check(runs.len(), runs.iter().map(|r| r.len()), len, lanes.len());
    let lanes = &lanes[..len * INTERLEAVED_LANES];
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: `check` proved every run holds `len` values and `lanes`
        // `len * 16`; the family is there, as `isa` found.
        Isa::Avx512 => return unsafe { x86::deinterleave_avx512(lanes, len, runs) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { x86::deinterleave_avx2(lanes, len, runs) },
        Isa::Baseline => {}
    }
    for (l, run) in runs.iter_mut().enumerate() {
        for (x, v) in run[..len].iter_mut().enumerate() {
            *v = lanes[x * INTERLEAVED_LANES + l];
        }
    }
}

#[track_caller]
fn check(runs: usize, mut lens: impl Iterator<Item = usize>, len: usize, lanes: usize) {
    assert!(
        runs <= INTERLEAVED_LANES,
        "{runs} runs cannot lie side by side in {INTERLEAVED_LANES} lanes"
    );
    assert!(
        lens.all(|l| l >= len),
        "every run must hold the {len} values laid side by side"
    );
    assert!(
        lanes >= len * INTERLEAVED_LANES,
        "{len} values of {INTERLEAVED_LANES} lanes need {} values, got {lanes}",
        len * INTERLEAVED_LANES
    );
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::lanes::{Avx2, Lanes, transpose8, transpose16};
    use super::INTERLEAVED_LANES as LANES;

    /// # Safety
    /// AVX-512 F is available; each run holds `len` values, `lanes`
    /// `len * 16`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn interleave_avx512(runs: &[&[f32]], len: usize, lanes: &mut [f32]) {
        for x0 in (0..len).step_by(LANES) {
            let n = (len - x0).min(LANES);
            let mask = ((1u32 << n) - 1) as __mmask16;
            let block: [__m512; LANES] = std::array::from_fn(|l| match runs.get(l) {
                // SAFETY: values x0..x0 + n of the run are inside it; the
                // mask keeps the rest unread.
                Some(run) => unsafe { _mm512_maskz_loadu_ps(mask, run.as_ptr().add(x0)) },
                None => _mm512_setzero_ps(),
            });
            for (i, pixel) in transpose16(block).iter().enumerate().take(n) {
                // SAFETY: pixel x0 + i < len holds 16 values of `lanes`.
                unsafe { _mm512_storeu_ps(lanes.as_mut_ptr().add((x0 + i) * LANES), *pixel) };
            }
        }
    }

    /// # Safety
    /// AVX-512 F is available; each run holds `len` values, `lanes`
    /// `len * 16`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn deinterleave_avx512(lanes: &[f32], len: usize, runs: &mut [&mut [f32]]) {
        for x0 in (0..len).step_by(LANES) {
            let n = (len - x0).min(LANES);
            let mask = ((1u32 << n) - 1) as __mmask16;
            let block: [__m512; LANES] = std::array::from_fn(|i| {
                if i < n {
                    // SAFETY: pixel x0 + i < len holds 16 values.
                    unsafe { _mm512_loadu_ps(lanes.as_ptr().add((x0 + i) * LANES)) }
                } else {
                    _mm512_setzero_ps()
                }
            });
            for (run, values) in runs.iter_mut().zip(transpose16(block)) {
                // SAFETY: values x0..x0 + n of the run are inside it; the
                // mask keeps the rest unwritten.
                unsafe { _mm512_mask_storeu_ps(run.as_mut_ptr().add(x0), mask, values) };
            }
        }
    }

    /// # Safety
    /// AVX2 and FMA are available; each run holds `len` values, `lanes`
    /// `len * 16`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn interleave_avx2(runs: &[&[f32]], len: usize, lanes: &mut [f32]) {
        for half in 0..LANES / Avx2::N {
            let first = half * Avx2::N;
            for x0 in (0..len).step_by(Avx2::N) {
                let n = (len - x0).min(Avx2::N);
                // SAFETY: AVX2 is enabled here.
                let mask = unsafe { Avx2::first(n) };
                let block: [__m256; 8] = std::array::from_fn(|l| match runs.get(first + l) {
                    // SAFETY: values x0..x0 + n of the run are inside it;
                    // the mask keeps the rest unread.
                    Some(run) => unsafe { Avx2::load_masked(mask, run.as_ptr().add(x0)) },
                    None => _mm256_setzero_ps(),
                });
                // SAFETY: AVX2 is enabled here.
                let turned = unsafe { transpose8(block) };
                for (i, pixel) in turned.iter().enumerate().take(n) {
                    // SAFETY: pixel x0 + i < len holds 16 values, of
                    // which this half's 8 start at `first`.
                    unsafe {
                        _mm256_storeu_ps(lanes.as_mut_ptr().add((x0 + i) * LANES + first), *pixel)
                    };
                }
            }
        }
    }

    /// # Safety
    /// AVX2 and FMA are available; each run holds `len` values, `lanes`
    /// `len * 16`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn deinterleave_avx2(lanes: &[f32], len: usize, runs: &mut [&mut [f32]]) {
        for (half, runs) in runs.chunks_mut(Avx2::N).enumerate() {
            let first = half * Avx2::N;
            for x0 in (0..len).step_by(Avx2::N) {
                let n = (len - x0).min(Avx2::N);
                let block: [__m256; 8] = std::array::from_fn(|i| {
                    if i < n {
                        // SAFETY: pixel x0 + i < len holds 16 values, of
                        // which this half's 8 start at `first`.
                        unsafe { _mm256_loadu_ps(lanes.as_ptr().add((x0 + i) * LANES + first)) }
                    } else {
                        _mm256_setzero_ps()
                    }
                });
                // SAFETY: AVX2 is enabled here.
                let (turned, mask) = unsafe { (transpose8(block), Avx2::first(n)) };
                for (run, values) in runs.iter_mut().zip(turned) {
                    // SAFETY: values x0..x0 + n of the run are inside it;
                    // the mask keeps the rest unwritten.
                    unsafe { Avx2::store_masked(mask, run.as_mut_ptr().add(x0), values) };
                }
            }
        }
    }
}
