//! MAX pooling over 2x2 windows at stride 2 (LeNet's, VGG's, every
//! classic net's), on AVX-512.
//!
//! The windows' columns interleave with their neighbours', so a loop over
//! them is a strided one the compiler leaves scalar or shuffles badly
//! (LeNet's pool1 ran at 13 GB/s). Here 32 adjacent inputs of each of
//! a window row's two rows are loaded and pulled apart into even and odd
//! columns with one permute each: the four corners of 16 windows in four
//! registers, compared in the order the pooling defines.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::{Isa, isa};

/// `y[p][r][q]` = the largest of the 2x2 window at `(2r, 2q)` of plane `p`
/// of `x`, for `planes` planes of `h x w` (both even) into planes of
/// `h/2 x w/2`, on AVX-512. Says whether it ran (`false`: no AVX-512, and
/// nothing was written).
///
/// The order of the comparisons is that of a general MAX pooling: each
/// column's largest from -inf down the window's rows, then the larger
/// of the two columns (the left on a tie), each step keeping the value
/// held unless the new one is greater, so a NaN never wins.
///
/// ```
/// let x = [1.0f32, 5.0, 2.0, 0.0,
///          3.0, 4.0, f32::NAN, -1.0];
/// let mut y = [0.0f32; 2];
/// if blob_kernels::cpu::max_pool_2x2(&x, 1, 2, 4, &mut y) {
///     assert_eq!(y, [5.0, 2.0]);
/// }
/// ```
///
/// # Panics
/// If `h` or `w` is odd, or `x` or `y` is shorter than its planes.
pub fn max_pool_2x2(x: &[f32], planes: usize, h: usize, w: usize, y: &mut [f32]) -> bool {
    check(x, planes, h, w, y);
    if isa() != Isa::Avx512 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `isa` found AVX-512 F; `check` put every plane inside `x`
    // and `y`.
    unsafe {
        planes_avx512(x, planes * h / 2, w, y)
    };
    #[cfg(target_arch = "x86_64")]
    return true;
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`max_pool_2x2`] that also writes each maximum's position in its
/// input plane to `argmax` (Caffe's `mask`), as Caffe's scan finds it:
/// the window's values in row order from -inf, the first strictly
/// greater one kept (so a NaN never wins, and the first of equal values
/// does; a window of NaN gives -inf at its first position).
///
/// ```
/// let x = [1.0f32, 5.0, 2.0, 2.0,
///          5.0, 4.0, f32::NAN, -1.0];
/// let (mut y, mut at) = ([0.0f32; 2], [0u32; 2]);
/// if blob_kernels::cpu::max_pool_2x2_positions(&x, 1, 2, 4, &mut y, &mut at) {
///     assert_eq!((y, at), ([5.0, 2.0], [1, 2]));
/// }
/// ```
///
/// # Panics
/// As [`max_pool_2x2`], and if `argmax` is shorter than `y`'s planes.
pub fn max_pool_2x2_positions(
    x: &[f32],
    planes: usize,
    h: usize,
    w: usize,
    y: &mut [f32],
    argmax: &mut [u32],
) -> bool {
    let outputs = planes * (h / 2) * (w / 2);
    assert!(
        argmax.len() >= outputs,
        "max_pool_2x2_positions: {outputs} outputs need as many positions, got {}",
        argmax.len()
    );
    assert!(
        h * w <= u32::MAX as usize,
        "max_pool_2x2_positions: a plane of {h} x {w} has positions past u32"
    );
    check(x, planes, h, w, y);
    if isa() != Isa::Avx512 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `isa` found AVX-512 F; the asserts put every plane inside
    // `x`, `y` and `argmax`.
    unsafe {
        positions_avx512(x, planes, (h, w), y, argmax)
    };
    #[cfg(target_arch = "x86_64")]
    return true;
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Panics unless `planes` planes of `h x w` (both even) fit `x`, and
/// their halves `y`.
fn check(x: &[f32], planes: usize, h: usize, w: usize, y: &[f32]) {
    assert!(
        h.is_multiple_of(2) && w.is_multiple_of(2),
        "max_pool_2x2: planes of {h} x {w} are not even"
    );
    let (plane_in, plane_out) = (h * w, h / 2 * (w / 2));
    assert!(
        x.len() >= planes * plane_in && y.len() >= planes * plane_out,
        "max_pool_2x2: {planes} planes of {h} x {w} need {} inputs and {} outputs, got {} and {}",
        planes * plane_in,
        planes * plane_out,
        x.len(),
        y.len()
    );
}

/// The first `n` of 16 lanes.
#[cfg(target_arch = "x86_64")]
fn lanes(n: usize) -> __mmask16 {
    ((1u32 << n.min(16)) - 1) as __mmask16
}

/// The windows of `outputs` (at most 16) outputs from the row pair at
/// `top` (the bottom row `w` values on): their top-left, top-right,
/// bottom-left and bottom-right values, a lane an output (0 past
/// `outputs`).
///
/// # Safety
/// AVX-512 F is available; `2 * outputs` values from `top` and from
/// `top + w` are readable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn corners(top: *const f32, w: usize, outputs: usize) -> [__m512; 4] {
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let (lo, hi) = (lanes(2 * outputs), lanes((2 * outputs).saturating_sub(16)));
    // SAFETY: the masks keep the loads to the 2 * outputs values of each
    // row, readable per the caller.
    let row = |at: *const f32| unsafe {
        let (first, second) = (
            _mm512_maskz_loadu_ps(lo, at),
            _mm512_maskz_loadu_ps(hi, at.add(16)),
        );
        (
            _mm512_permutex2var_ps(first, even, second),
            _mm512_permutex2var_ps(first, odd, second),
        )
    };
    let (top_left, top_right) = row(top);
    let (bottom_left, bottom_right) = row(top.wrapping_add(w));
    [top_left, top_right, bottom_left, bottom_right]
}

/// [`max_pool_2x2`] over `pairs` pairs of input rows of `w` values (a
/// plane's rows pair up, and planes follow each other).
///
/// # Safety
/// AVX-512 F is available; `x` holds `2 * pairs * w` values and `y`
/// `pairs * w / 2`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn planes_avx512(x: &[f32], pairs: usize, w: usize, y: &mut [f32]) {
    let ow = w / 2;
    let neg = _mm512_set1_ps(f32::NEG_INFINITY);
    // `larger(held, v)`: v where v > held, else held (NaN never wins).
    let larger = |held: __m512, v: __m512| _mm512_max_ps(v, held);
    for pair in 0..pairs {
        let top = x.as_ptr().wrapping_add(2 * pair * w);
        let out = y.as_mut_ptr().wrapping_add(pair * ow);
        for q0 in (0..ow).step_by(16) {
            let outputs = (ow - q0).min(16);
            // SAFETY: inputs 2 * q0 .. 2 * (q0 + outputs) of both rows and
            // outputs q0 .. q0 + outputs of the output row are inside the
            // slices, per the caller; the mask keeps the rest untouched.
            unsafe {
                let [tl, tr, bl, br] = corners(top.add(2 * q0), w, outputs);
                let left = larger(larger(neg, tl), bl);
                let right = larger(larger(neg, tr), br);
                _mm512_mask_storeu_ps(out.add(q0), lanes(outputs), larger(left, right));
            }
        }
    }
}

/// [`max_pool_2x2_positions`] over `planes` planes of `h x w`.
///
/// # Safety
/// AVX-512 F is available; `x` holds the planes, `y` and `argmax` their
/// outputs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn positions_avx512(
    x: &[f32],
    planes: usize,
    (h, w): (usize, usize),
    y: &mut [f32],
    argmax: &mut [u32],
) {
    let (oh, ow) = (h / 2, w / 2);
    let step = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for pair in 0..planes * oh {
        let top = x.as_ptr().wrapping_add(2 * pair * w);
        let out = pair * ow;
        // The top-left corner's position in the plane, for output 0.
        let corner = (2 * (pair % oh) * w) as i32;
        for q0 in (0..ow).step_by(16) {
            let outputs = (ow - q0).min(16);
            let first = _mm512_add_epi32(step, _mm512_set1_epi32(corner + 2 * q0 as i32));
            // SAFETY: as in `planes_avx512`, and outputs q0 .. q0 +
            // outputs of the row are inside `argmax` too.
            unsafe {
                let values = corners(top.add(2 * q0), w, outputs);
                let shifts = [0, 1, w as i32, w as i32 + 1];
                let mut best = _mm512_set1_ps(f32::NEG_INFINITY);
                let mut at = first;
                // Caffe's scan: row by row, the first strictly greater.
                for (v, shift) in values.into_iter().zip(shifts) {
                    let greater = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, best);
                    best = _mm512_mask_blend_ps(greater, best, v);
                    let position = _mm512_add_epi32(first, _mm512_set1_epi32(shift));
                    at = _mm512_mask_blend_epi32(greater, at, position);
                }
                let keep = lanes(outputs);
                _mm512_mask_storeu_ps(y.as_mut_ptr().add(out + q0), keep, best);
                _mm512_mask_storeu_epi32(argmax.as_mut_ptr().add(out + q0).cast(), keep, at);
            }
        }
    }
}
