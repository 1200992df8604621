//! Shallow products from packed panels: Winograd's point-by-point gemms
//! ([`gemm_panels`](super::gemm_panels)), whose depth is a layer's input
//! channels (16 in SqueezeNet's fire2, 64 in ResNet-50's res2). A tile of
//! such a product does a few hundred multiply-adds, and the general kernel's
//! machinery around each tile (its choice of tile, its requests for
//! lines ahead, its finishes and masks) cost as much again; here each
//! tile is the plain loop and its stores.

use super::PANEL_COLUMNS;
use super::lanes::{Lanes, on_lanes};
use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};

/// The deepest product [`run`] takes whatever its rows. One Zen 3 core
/// (AVX2, 2026-12-07), 36 products from 36 packs as a Winograd block
/// makes them, µs, the general kernel against this one: 40 x 64 x 16
/// (SqueezeNet's fire2/expand3x3) 71 / 46, 20 x 128 x 32 120-135 / 77-84,
/// 15 x 192 x 48 171 / 131-134, 30 x 64 x 64 (ResNet-50's res2) 145 /
/// 105-110. In the nets at batch 1 (first quartiles of 8-16 alternating
/// runs, ms): SqueezeNet v1.1's fire2/expand3x3 0.64 -> 0.49, fire4 0.49
/// -> 0.43, fire6 0.44 -> 0.35, fire7 to fire9 level; ResNet-50's res2
/// 3x3 layers 1.52-1.62 -> 1.35-1.39.
pub(crate) const SHALLOW_MAX_DEPTH: usize = 64;

/// The deepest product [`run`] takes where it has at least
/// [`TALL_MIN_ROWS`] rows: at 28 x 28 (49 tiles a block), GoogLeNet's
/// inception_3a/3x3 (96 deep) and 3b (128) and ResNet-50's res3 3x3
/// layers (128). One Zen 3 core (AVX2, 2026-12-07, batch 1, first
/// quartiles of 10 alternating runs, ms): 3a 0.762 -> 0.726, 3b 1.402 ->
/// 1.340, res3a-d 0.98-1.13 -> 0.92-1.08. At 14 x 14 (16 tiles),
/// GoogLeNet's inception_4a-4c (96-128 deep) ran 5-14% slower here than
/// in the general kernel (4c 0.651 -> 0.745), in the nets though not in
/// the products alone; neither bands of 6, 5 and 5 rows nor passing each
/// panel down all 16 rows before the next closed it.
pub(crate) const TALL_MAX_DEPTH: usize = 128;

/// The fewest rows of a product deeper than [`SHALLOW_MAX_DEPTH`] that
/// [`run`] takes (see [`TALL_MAX_DEPTH`]).
pub(crate) const TALL_MIN_ROWS: usize = 32;

/// Whether [`run`] is the kernel for an `m x k` by `k x n` product from
/// packed panels: at most [`SHALLOW_MAX_DEPTH`] deep, or at most
/// [`TALL_MAX_DEPTH`] with [`TALL_MIN_ROWS`] rows.
pub(crate) fn suits(m: usize, k: usize) -> bool {
    k <= SHALLOW_MAX_DEPTH || k <= TALL_MAX_DEPTH && m >= TALL_MIN_ROWS
}

/// `C = A B` for a row-major `m x k` A (`k` at most
/// [`TALL_MAX_DEPTH`]; [`suits`] says where this kernel is the faster
/// one) and the `k x n` B packed in panels of [`PANEL_COLUMNS`] at
/// `panels`, into C's first `n` columns (rows `ldc` apart), each band of
/// tiles asking for its share of the rows of the pack at `then` (null
/// where none: the next point's, which comes from memory where a
/// layer's transformed weights stream); says whether it ran (`false` on
/// the baseline, where nothing is read or written). Each value of C is
/// its products summed in depth order, as the general kernel sums them:
/// the same bits.
///
/// # Safety
/// A's `m x k` values are readable; `panels` holds `n.div_ceil(32)`
/// panels of `k` rows; C's `m x n` values are written by no one else
/// meanwhile and alias neither.
pub(crate) unsafe fn run(
    (m, k, n): (usize, usize, usize),
    a: *const f32,
    (panels, then): (*const f32, *const f32),
    (c, ldc): (*mut f32, isize),
) -> bool {
    on_lanes!(|L| {
        // SAFETY: as the caller promises.
        unsafe { panel_bands::<L>((m, k, n), a, (panels, then), (c, ldc)) }
    })
    .is_some()
}

/// [`run`] on `L`: band after band of
/// [`rows_per_tile`](super::sgemm::rows_per_tile) rows of C (their rows
/// of A stay in L1), each across the panels two registers' columns at a
/// time. Band `b` of `bands` asks for rows `b * share..` of the next
/// pack, `share` its depth over the bands: asked for by the first band
/// alone, the 128-deep packs of ResNet-50's res3 (64 KB a point) came
/// too late, and the layers ran 6-12% slower than in the general
/// kernel, whose requests are spread over its tiles.
///
/// # Safety
/// As [`run`], and `L`'s instructions are enabled.
#[inline(always)]
unsafe fn panel_bands<L: Lanes>(
    (m, k, n): (usize, usize, usize),
    a: *const f32,
    (panels, then): (*const f32, *const f32),
    (c, ldc): (*mut f32, isize),
) {
    let mr = super::sgemm::rows_per_tile::<L>(m);
    let width = 2 * L::N;
    let share = k.div_ceil(m.div_ceil(mr));
    let mut i = 0;
    while i < m {
        let rows = mr.min(m - i);
        let first = (i / mr * share).min(k);
        let asked = share.min(k - first);
        for j in (0..n).step_by(width) {
            let cols = width.min(n - j);
            let at = j / PANEL_COLUMNS * PANEL_COLUMNS * k + j % PANEL_COLUMNS;
            // This band's rows of the next pack, the same columns (none
            // where there is no next pack).
            let ahead = if then.is_null() {
                (std::ptr::null(), 0)
            } else {
                (then.wrapping_add(at + first * PANEL_COLUMNS), asked)
            };
            // SAFETY: column j's panel holds k rows of PANEL_COLUMNS
            // values, its two registers' columns among them; rows i..i +
            // rows of A and C, columns j..j + cols of C, inside them per
            // the caller.
            unsafe {
                let (a, c) = (a.add(i * k), c.offset(i as isize * ldc + j as isize));
                let at = (k, a, panels.add(at), (c, ldc), cols);
                match rows {
                    1 => tile::<L, 1>(at, ahead),
                    2 => tile::<L, 2>(at, ahead),
                    3 => tile::<L, 3>(at, ahead),
                    4 => tile::<L, 4>(at, ahead),
                    5 => tile::<L, 5>(at, ahead),
                    6 => tile::<L, 6>(at, ahead),
                    7 => tile::<L, 7>(at, ahead),
                    8 => tile::<L, 8>(at, ahead),
                    9 => tile::<L, 9>(at, ahead),
                    10 => tile::<L, 10>(at, ahead),
                    11 => tile::<L, 11>(at, ahead),
                    _ => tile::<L, 12>(at, ahead),
                }
            }
        }
        i += rows;
    }
}

/// One tile: `ROWS` rows of A (`k` apart) by two registers' columns of a
/// panel (rows [`PANEL_COLUMNS`] apart), into C's first `cols` of them;
/// `ahead` is `(rows, count)`: it asks for the same columns of the
/// `count` rows there into L2, a row each of its first steps (none where
/// `count` is 0).
///
/// # Safety
/// As [`panel_bands`]; `ROWS` rows of A and C and `cols` columns of C
/// (at most two registers') are inside them.
#[inline(always)]
unsafe fn tile<L: Lanes, const ROWS: usize>(
    (k, a, b, (c, ldc), cols): (usize, *const f32, *const f32, (*mut f32, isize), usize),
    (next, asked): (*const f32, usize),
) {
    // SAFETY: as the caller promises: the panel's rows are whole
    // registers wide, A's rows k deep; a prefetch reads nothing.
    unsafe {
        let mut acc = [[L::zero(); 2]; ROWS];
        // A macro rather than a closure, so that it is compiled with the
        // caller's instructions.
        macro_rules! step {
            ($p:expr) => {{
                let p: usize = $p;
                let row = b.add(p * PANEL_COLUMNS);
                let (b0, b1) = (L::load(row), L::load(row.add(L::N)));
                for (r, sums) in acc.iter_mut().enumerate() {
                    let x = L::splat(*a.add(r * k + p));
                    sums[0] = L::fmadd(x, b0, sums[0]);
                    sums[1] = L::fmadd(x, b1, sums[1]);
                }
            }};
        }
        for p in 0..asked {
            let line = next.wrapping_add(p * PANEL_COLUMNS);
            for at in (0..2 * L::N).step_by(16) {
                _mm_prefetch::<_MM_HINT_T1>(line.wrapping_add(at) as *const i8);
            }
            step!(p);
        }
        for p in asked..k {
            step!(p);
        }
        for (r, sums) in acc.iter().enumerate() {
            let to = c.offset(r as isize * ldc);
            if cols == 2 * L::N {
                L::store(to, sums[0]);
                L::store(to.add(L::N), sums[1]);
            } else {
                L::store_masked(L::first(cols), to, sums[0]);
                if cols > L::N {
                    L::store_masked(L::first(cols - L::N), to.add(L::N), sums[1]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::lanes::{Available, Avx2, Avx512};
    use crate::cpu::{Isa, pack_panels, panels_len};

    /// C as the tiles sum it: each value its products fused in depth
    /// order from zero.
    fn fused_in_order(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
        let mut c = vec![0.0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).fold(0.0, |sum, p| a[i * k + p].mul_add(b[p * n + j], sum));
            }
        }
        c
    }

    /// Every height of the last band, columns that end inside a register
    /// and inside a panel, with and without a next pack to ask for, on
    /// each family this CPU has: the same bits as the sums in order, and
    /// C's values past its `n` columns (its rows are wider) untouched.
    #[test]
    fn shallow_products_sum_in_depth_order() {
        fn check<L: Lanes>(here: Available<L>) {
            for (m, n, k) in [
                (1, 1, 1),
                (40, 64, 16),
                (13, 70, 32),
                (7, 17, 64),
                (16, 256, 48),
                (11, 33, 5),
                (25, 8, 64),
                (12, 31, 3),
                (49, 40, 128),
                (40, 20, 2),
            ] {
                let a: Vec<f32> = (0..m * k)
                    .map(|v| ((v * 7 % 19) as f32 - 9.0) * 0.37)
                    .collect();
                let b: Vec<f32> = (0..k * n)
                    .map(|v| ((v * 5 % 23) as f32 - 11.0) * 0.21)
                    .collect();
                let mut panels = vec![f32::NAN; panels_len(k, n)];
                pack_panels(&b, k, n, &mut panels);
                let then = panels.clone();
                let want = fused_in_order(m, n, k, &a, &b);
                for next in [std::ptr::null(), then.as_ptr()] {
                    let ldc = n + 3;
                    let mut c = vec![-1.0f32; m * ldc];
                    here.run(|| {
                        // SAFETY: A, the pack, its copy and C hold their
                        // matrices.
                        unsafe {
                            panel_bands::<L>(
                                (m, k, n),
                                a.as_ptr(),
                                (panels.as_ptr(), next),
                                (c.as_mut_ptr(), ldc as isize),
                            )
                        }
                    });
                    for i in 0..m {
                        let row = &c[i * ldc..][..ldc];
                        assert_eq!(row[..n], want[i * n..][..n], "{m}x{n}x{k} row {i}");
                        assert!(row[n..].iter().all(|&v| v == -1.0), "{m}x{n}x{k} row {i}");
                    }
                }
            }
        }
        if Isa::Avx2.is_available() {
            // SAFETY: the CPU has them.
            check(unsafe { Available::<Avx2>::new() });
        }
        if Isa::Avx512.is_available() {
            // SAFETY: the CPU has them.
            check(unsafe { Available::<Avx512>::new() });
        }
    }
}
