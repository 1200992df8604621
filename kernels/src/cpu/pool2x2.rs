//! MAX pooling over 2x2 windows at stride 2 (LeNet's, VGG's, every
//! classic net's), on AVX-512 and AVX2 (its gradient on AVX-512).
//!
//! The windows' columns interleave with their neighbours', so a loop over
//! them is a strided one the compiler leaves scalar or shuffles badly
//! (LeNet's pool1 ran at 13 GB/s). Here two registers of adjacent inputs
//! of each of a window row's two rows are loaded and pulled apart into
//! even and odd columns with one permute each: the four corners of a
//! register of windows in four registers, compared in the order the
//! pooling defines.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use super::lanes::{Lanes, on_lanes};
use super::{Isa, isa};

/// `y[p][r][q]` = the largest of the 2x2 window at `(2r, 2q)` of plane `p`
/// of `x`, for `planes` planes of `h x w` (both even) into planes of
/// `h/2 x w/2`, on AVX-512 or AVX2. Says whether it ran (`false`:
/// neither, and nothing was written).
///
/// The order of the comparisons is that of a general MAX pooling: each
/// column's largest from -FLT_MAX down the window's rows, then the larger
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
    check("max_pool_2x2", x, planes, h, w, y);
    #[cfg(target_arch = "x86_64")]
    return on_lanes!(|L| {
        // SAFETY: `check` put every plane inside `x` and `y`.
        unsafe { pool_pairs::<L>(x, planes * h / 2, w, y) }
    })
    .is_some();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`max_pool_2x2`] that also writes each maximum's position in its
/// input plane to `argmax` (Caffe's `mask`), as Caffe's scan finds it:
/// the window's values in row order from -FLT_MAX, the first strictly
/// greater one kept (so a NaN never wins, and the first of equal values
/// does; a window of NaN gives -FLT_MAX, as Caffe's, at its first position).
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
    check("max_pool_2x2_positions", x, planes, h, w, y);
    #[cfg(target_arch = "x86_64")]
    return on_lanes!(|L| {
        // SAFETY: the asserts put every plane inside `x`, `y` and
        // `argmax`.
        unsafe { positions::<L>(x, planes, (h, w), y, argmax) }
    })
    .is_some();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The gradient of [`max_pool_2x2_positions`]: `dx[p][i]` = `dy[p][o]`
/// where `i` is `argmax[p][o]`, the maximum's position in the window of
/// output `o`, and 0 elsewhere (Caffe's MAX pooling `Backward_cpu`,
/// which zeroes `dx` and adds each gradient at its position), for
/// `planes` planes of `h x w` (both even), on AVX-512. Each input is
/// written once, from its own window; a position outside its window (not
/// one `max_pool_2x2_positions` writes) routes nothing. Says whether it
/// ran (`false`: no AVX-512, and nothing was written).
///
/// ```
/// // One plane of 2 x 4: windows with their maxima at 1 and 6.
/// let mut dx = [f32::NAN; 8];
/// if blob_kernels::cpu::max_unpool_2x2(&[0.5, 2.0], &[1, 6], 1, 2, 4, &mut dx) {
///     assert_eq!(dx, [0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0]);
/// }
/// ```
///
/// # Panics
/// If `h` or `w` is odd, or `dx`, `dy` or `argmax` is shorter than its
/// planes.
pub fn max_unpool_2x2(
    dy: &[f32],
    argmax: &[u32],
    planes: usize,
    h: usize,
    w: usize,
    dx: &mut [f32],
) -> bool {
    check("max_unpool_2x2", dx, planes, h, w, dy);
    let outputs = planes * (h / 2) * (w / 2);
    assert!(
        argmax.len() >= outputs,
        "max_unpool_2x2: {outputs} outputs need as many positions, got {}",
        argmax.len()
    );
    if isa() != Isa::Avx512 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `isa` found AVX-512 F; the asserts put every plane inside
    // `dx`, `dy` and `argmax`.
    unsafe {
        unpool_avx512(dy, argmax, planes, (h, w), dx)
    };
    #[cfg(target_arch = "x86_64")]
    return true;
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Panics unless `planes` planes of `h x w` (both even) fit `x`, and
/// their halves `y`.
fn check(op: &str, x: &[f32], planes: usize, h: usize, w: usize, y: &[f32]) {
    assert!(
        h.is_multiple_of(2) && w.is_multiple_of(2),
        "{op}: planes of {h} x {w} are not even"
    );
    let (plane_in, plane_out) = (h * w, h / 2 * (w / 2));
    assert!(
        x.len() >= planes * plane_in && y.len() >= planes * plane_out,
        "{op}: {planes} planes of {h} x {w} need {} inputs and {} outputs, got {} and {}",
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

/// The windows of `outputs` (at most `N`) outputs from the row pair at
/// `top` (the bottom row `w` values on): their top-left, top-right,
/// bottom-left and bottom-right values, a lane an output (0 past
/// `outputs`).
///
/// # Safety
/// `L`'s instructions are enabled; `2 * outputs` values from `top` and
/// from `top + w` are readable.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn corners<L: Lanes>(top: *const f32, w: usize, outputs: usize) -> [L::V; 4] {
    // SAFETY: the caller's.
    let (top_left, top_right) = unsafe { pulled_apart::<L>(top, outputs) };
    // SAFETY: the caller's.
    let (bottom_left, bottom_right) = unsafe { pulled_apart::<L>(top.wrapping_add(w), outputs) };
    [top_left, top_right, bottom_left, bottom_right]
}

/// The even and odd columns of the `2 * outputs` values at `at`, a lane
/// an output (0 past `outputs`). A function, not a closure: a closure in
/// generic code is compiled without the family's instructions, and its
/// intrinsics were left as calls (P-Net's pool1 ran 50x slower).
///
/// # Safety
/// `L`'s instructions are enabled; `2 * outputs` values from `at` are
/// readable.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn pulled_apart<L: Lanes>(at: *const f32, outputs: usize) -> (L::V, L::V) {
    // SAFETY: the masks keep the loads to the 2 * outputs values, readable
    // per the caller, who has `L`.
    unsafe {
        let (lo, hi) = (
            L::first(2 * outputs),
            L::first((2 * outputs).saturating_sub(L::N)),
        );
        let (first, second) = (
            L::load_masked(lo, at),
            L::load_masked(hi, at.wrapping_add(L::N)),
        );
        (L::even(first, second), L::odd(first, second))
    }
}

/// [`max_pool_2x2`] over `pairs` pairs of input rows of `w` values (a
/// plane's rows pair up, and planes follow each other).
///
/// # Safety
/// `L`'s instructions are enabled; `x` holds `2 * pairs * w` values and
/// `y` `pairs * w / 2`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn pool_pairs<L: Lanes>(x: &[f32], pairs: usize, w: usize, y: &mut [f32]) {
    let ow = w / 2;
    // SAFETY: `L`'s instructions are enabled, per the caller.
    let neg = unsafe { L::splat(f32::MIN) };
    for pair in 0..pairs {
        let top = x.as_ptr().wrapping_add(2 * pair * w);
        let out = y.as_mut_ptr().wrapping_add(pair * ow);
        for q0 in (0..ow).step_by(L::N) {
            let outputs = (ow - q0).min(L::N);
            // SAFETY: inputs 2 * q0 .. 2 * (q0 + outputs) of both rows and
            // outputs q0 .. q0 + outputs of the output row are inside the
            // slices, per the caller; the mask keeps the rest untouched.
            unsafe {
                let [tl, tr, bl, br] = corners::<L>(top.add(2 * q0), w, outputs);
                // `max(v, held)`: v where v > held, else held (NaN never
                // wins).
                let left = L::max(bl, L::max(tl, neg));
                let right = L::max(br, L::max(tr, neg));
                L::store_masked(L::first(outputs), out.add(q0), L::max(right, left));
            }
        }
    }
}

/// [`max_pool_2x2_positions`] over `planes` planes of `h x w`: each
/// register of windows' maxima and which of their four corners held it
/// (Caffe's scan: row by row, the first strictly greater), the corner
/// turned into its position in the plane a value at a time.
///
/// # Safety
/// `L`'s instructions are enabled; `x` holds the planes, `y` and
/// `argmax` their outputs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn positions<L: Lanes>(
    x: &[f32],
    planes: usize,
    (h, w): (usize, usize),
    y: &mut [f32],
    argmax: &mut [u32],
) {
    let (oh, ow) = (h / 2, w / 2);
    let shifts = [0, 1, w, w + 1];
    let mut held = [0f32; 16];
    for pair in 0..planes * oh {
        let top = x.as_ptr().wrapping_add(2 * pair * w);
        let out = pair * ow;
        // The top-left corner's position in the plane, for output 0.
        let corner = 2 * (pair % oh) * w;
        for q0 in (0..ow).step_by(L::N) {
            let outputs = (ow - q0).min(L::N);
            // SAFETY: as in `pool_pairs`, and outputs q0 .. q0 + outputs
            // of the row are inside `argmax` too; `held` holds a
            // register.
            unsafe {
                let values = corners::<L>(top.add(2 * q0), w, outputs);
                let mut best = L::splat(f32::MIN);
                let mut which = L::zero();
                for (i, v) in values.into_iter().enumerate() {
                    which = L::where_greater(v, best, L::splat(i as f32), which);
                    best = L::where_greater(v, best, v, best);
                }
                L::store_masked(L::first(outputs), y.as_mut_ptr().add(out + q0), best);
                L::store(held.as_mut_ptr(), which);
            }
            for (l, &i) in held[..outputs].iter().enumerate() {
                argmax[out + q0 + l] = (corner + 2 * (q0 + l) + shifts[i as usize]) as u32;
            }
        }
    }
}

/// [`max_unpool_2x2`] over `planes` planes of `h x w`: for 16 outputs of
/// a row at a time, each gradient and position spread to the two input
/// columns of its window, kept in each of the window's two rows where
/// the position is that input's.
///
/// # Safety
/// AVX-512 F is available; `dx` holds the planes, `dy` and `argmax`
/// their outputs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn unpool_avx512(
    dy: &[f32],
    argmax: &[u32],
    planes: usize,
    (h, w): (usize, usize),
    dx: &mut [f32],
) {
    let (oh, ow) = (h / 2, w / 2);
    // Input column 2q + c of a register reads output q: lanes 0..16 of
    // the left half's inputs from outputs 0..8, the right half's from 8..16.
    let spread = [
        _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
        _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15),
    ];
    let column = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for pair in 0..planes * oh {
        let out = pair * ow;
        let top = dx.as_mut_ptr().wrapping_add(2 * pair * w);
        // Row 2r's first position in the plane.
        let corner = (2 * (pair % oh) * w) as i32;
        for q0 in (0..ow).step_by(16) {
            let outputs = (ow - q0).min(16);
            let keep = lanes(outputs);
            // SAFETY: outputs q0 .. q0 + outputs of the row are inside
            // `dy` and `argmax`, inputs 2 * q0 .. 2 * (q0 + outputs) of
            // both rows inside `dx`, per the caller; the masks keep the
            // rest untouched.
            unsafe {
                let grads = _mm512_maskz_loadu_ps(keep, dy.as_ptr().add(out + q0));
                let at = _mm512_maskz_loadu_epi32(keep, argmax.as_ptr().add(out + q0).cast());
                for (half, spread) in spread.iter().enumerate() {
                    let inputs = (2 * outputs).saturating_sub(16 * half).min(16);
                    if inputs == 0 {
                        continue;
                    }
                    let (g, a) = (
                        _mm512_permutexvar_ps(*spread, grads),
                        _mm512_permutexvar_epi32(*spread, at),
                    );
                    let first = corner + (2 * q0 + 16 * half) as i32;
                    for row in 0..2 {
                        let position =
                            _mm512_add_epi32(column, _mm512_set1_epi32(first + (row * w) as i32));
                        let here = _mm512_cmpeq_epi32_mask(a, position);
                        let to = top.add(row * w + 2 * q0 + 16 * half);
                        _mm512_mask_storeu_ps(to, lanes(inputs), _mm512_maskz_mov_ps(here, g));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpooling_routes_each_gradient_to_its_maximum_alone() {
        // Rows of 1, 12 (LeNet's pool1), 16, 17 and 20 windows: a partial
        // register, a whole one, one past it, two.
        for (planes, h, w) in [(3, 4, 2), (2, 24, 24), (2, 2, 32), (1, 6, 34), (2, 4, 40)] {
            let n = planes * h * w;
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 7919 % 211) as f32 - 100.0) * 0.25)
                .collect();
            let outputs = planes * (h / 2) * (w / 2);
            let (mut y, mut at) = (vec![0.0f32; outputs], vec![0u32; outputs]);
            if !max_pool_2x2_positions(&x, planes, h, w, &mut y, &mut at) {
                return;
            }
            let dy: Vec<f32> = (0..outputs).map(|o| o as f32 + 1.0).collect();
            let mut want = vec![0.0f32; n];
            for (o, (&g, &p)) in dy.iter().zip(&at).enumerate() {
                want[o / (h / 2 * (w / 2)) * h * w + p as usize] += g;
            }
            let mut got = vec![f32::NAN; n + 3];
            if !max_unpool_2x2(&dy, &at, planes, h, w, &mut got) {
                // The gradient's routing has no AVX2 form yet.
                assert_eq!(isa(), Isa::Avx2);
                return;
            }
            assert_eq!(got[..n], want, "{planes} x {h} x {w}");
            assert!(
                got[n..].iter().all(|v| v.is_nan()),
                "{planes} x {h} x {w}: past the planes"
            );
        }
    }
}
