//! A vector register of f32 lanes as the hand-written kernels see it, on
//! each x86-64 family they run on: [`Avx512`] (16 lanes, masks in mask
//! registers) and [`Avx2`] (8 lanes with FMA, masks as lane vectors).
//!
//! A kernel is written once over [`Lanes`] (`#[inline(always)]`, so it
//! compiles into its caller) and run through [`Lanes::enabled`], which
//! compiles that caller with the family's instructions. Keep intrinsics
//! out of closures in such code (`std::array::from_fn` closures too,
//! unless marked `#[inline(always)]`): a closure is compiled without the
//! family's target features, and the intrinsics inside it stay calls
//! (it once made LeNet's pools 30 times slower on AVX2). Both copies issue
//! the same multiply-adds in the same order along each sum, so a product
//! accumulated lane by lane gives the same bits on either; only the final
//! adding of a register's lanes (`reduce_add`) differs between widths.

use std::arch::x86_64::*;

use super::Isa;

/// One family's f32 vector register and the operations the kernels use.
///
/// Every method is `unsafe`: it needs the family's instructions, which
/// [`Lanes::enabled`] provides to the code it runs; the loads and stores
/// need their lanes inside an allocation.
pub(crate) trait Lanes: Copy + 'static {
    /// Lanes in a register.
    const N: usize;
    /// The family, as [`super::isa`] names it.
    const ISA: Isa;
    /// Rows of C a gemm tile of two registers a row may take, smallest
    /// first: as many as the register file holds with B's two loads and
    /// A's broadcast.
    const TILE_ROWS: [usize; 3];
    /// A register.
    type V: Copy;
    /// Which lanes a masked load or store touches: the first `n`.
    type M: Copy;

    /// Runs `f` compiled with this family's instructions.
    ///
    /// # Safety
    /// The CPU has them ([`Isa::is_available`]).
    unsafe fn enabled<R>(f: impl FnOnce() -> R) -> R;
    /// The first `n` lanes (all of them from `N` on).
    unsafe fn first(n: usize) -> Self::M;
    /// Whether `m` keeps every lane.
    fn whole(m: Self::M) -> bool;
    /// Every lane 0.
    unsafe fn zero() -> Self::V;
    /// Every lane `x`.
    unsafe fn splat(x: f32) -> Self::V;
    /// `N` values from `p`.
    unsafe fn load(p: *const f32) -> Self::V;
    /// The lanes `m` keeps from `p`, 0 in the others (which are not read).
    unsafe fn load_masked(m: Self::M, p: *const f32) -> Self::V;
    /// `v` into `N` values at `p`.
    unsafe fn store(p: *mut f32, v: Self::V);
    /// The lanes `m` keeps into `p` (the others are not written).
    unsafe fn store_masked(m: Self::M, p: *mut f32, v: Self::V);
    /// `a * b + c`, rounded once.
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `a + b`.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// `a * b`.
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    /// The bits of `a` and `b` anded, lane by lane (a lane anded with
    /// all ones stays, with zeros becomes +0).
    unsafe fn and(a: Self::V, b: Self::V) -> Self::V;
    /// `b` where `a` is not greater, else `a`, lane by lane (a NaN in
    /// either gives `b`: a pooling's held value is `b`).
    unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
    /// `b` where `a` is not less, else `a`, lane by lane (a NaN in
    /// either gives `b`).
    unsafe fn min(a: Self::V, b: Self::V) -> Self::V;
    /// `then` in the lanes where `v > held` (ordered: never where either
    /// is NaN), `otherwise` in the others.
    unsafe fn where_greater(
        v: Self::V,
        held: Self::V,
        then: Self::V,
        otherwise: Self::V,
    ) -> Self::V;
    /// The lanes `m` keeps from `p`, `fill`'s in the others (which are
    /// not read).
    unsafe fn load_masked_or(m: Self::M, fill: Self::V, p: *const f32) -> Self::V;
    /// The even lanes of `lo` then `hi` as one register (lane `i` is
    /// value `2 i` of the two registers' `2 N` values).
    unsafe fn even(lo: Self::V, hi: Self::V) -> Self::V;
    /// The odd lanes of `lo` then `hi` as one register.
    unsafe fn odd(lo: Self::V, hi: Self::V) -> Self::V;
    /// `a`'s lanes moved down one, `b`'s first lane in the last: lanes
    /// `1..N + 1` of `a` then `b`.
    unsafe fn shift_in(a: Self::V, b: Self::V) -> Self::V;
    /// `b`'s lanes moved up one, `a`'s last lane in the first: lanes
    /// `N - 1..2 N - 1` of `a` then `b`.
    unsafe fn shift_up(a: Self::V, b: Self::V) -> Self::V;
    /// The sum of the lanes, in an order fixed by the family.
    unsafe fn reduce_add(v: Self::V) -> f32;
    /// Fills `kc` rows of a gemm panel (`PANEL_COLUMNS` values a row)
    /// with the `cols` columns that `column(j)` points at, each `kc`
    /// adjacent values, through registers a square block at a time;
    /// columns past `cols` are zero.
    ///
    /// # Safety
    /// Values `0..kc` at `column(j)` are readable for each `j < cols`;
    /// `panel` holds `kc * PANEL_COLUMNS` values.
    unsafe fn transpose_columns(
        panel: &mut [f32],
        column: impl Fn(usize) -> *const f32,
        kc: usize,
        cols: usize,
    );
}

/// Runs `$body` with `$L` the [`Lanes`] of the family [`super::isa`]
/// chose, compiled for it, as `Some` of its value; `None` on the
/// baseline, where the caller runs its portable loop.
macro_rules! on_lanes {
    (|$L:ident| $body:expr) => {
        match $crate::cpu::isa() {
            $crate::cpu::Isa::Avx512 => {
                type $L = $crate::cpu::lanes::Avx512;
                // SAFETY: `isa` chose AVX-512 only where the CPU has it.
                let here = unsafe { $crate::cpu::lanes::Available::<$L>::new() };
                Some(here.run(
                    #[inline(always)]
                    || $body,
                ))
            }
            $crate::cpu::Isa::Avx2 => {
                type $L = $crate::cpu::lanes::Avx2;
                // SAFETY: `isa` chose AVX2 only where the CPU has it.
                let here = unsafe { $crate::cpu::lanes::Available::<$L>::new() };
                Some(here.run(
                    #[inline(always)]
                    || $body,
                ))
            }
            $crate::cpu::Isa::Baseline => None,
        }
    };
}
pub(crate) use on_lanes;

/// Proof that the CPU has `L`'s instructions: what [`on_lanes`] runs its
/// body through.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Available<L>(std::marker::PhantomData<L>);

impl<L: Lanes> Available<L> {
    /// # Safety
    /// The CPU has `L`'s instructions.
    pub(crate) unsafe fn new() -> Self {
        Self(std::marker::PhantomData)
    }

    /// Runs `f` compiled with `L`'s instructions.
    #[inline(always)]
    pub(crate) fn run<R>(self, f: impl FnOnce() -> R) -> R {
        // SAFETY: `self` is made only where the CPU has them.
        unsafe { L::enabled(f) }
    }
}

/// AVX-512 F: 16 lanes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512;

/// AVX2 with FMA: 8 lanes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2;

/// The first lanes an [`Avx2`] mask keeps, and as a lane vector.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2Mask {
    n: usize,
    lanes: __m256i,
}

// Each method is one instruction whose contract is the method's own.
#[allow(unsafe_op_in_unsafe_fn)]
impl Lanes for Avx512 {
    const N: usize = 16;
    const ISA: Isa = Isa::Avx512;
    const TILE_ROWS: [usize; 3] = [8, 10, 12];
    type V = __m512;
    type M = __mmask16;

    #[inline(always)]
    unsafe fn enabled<R>(f: impl FnOnce() -> R) -> R {
        // SAFETY: the caller found AVX-512.
        unsafe { super::isa::x86::avx512(f) }
    }
    #[inline(always)]
    unsafe fn first(n: usize) -> __mmask16 {
        ((1u32 << n.min(16)) - 1) as __mmask16
    }
    #[inline(always)]
    fn whole(m: __mmask16) -> bool {
        m == !0
    }
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        _mm512_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: the caller's.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_masked(m: __mmask16, p: *const f32) -> __m512 {
        // SAFETY: the caller's; masked-off lanes are not read.
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        // SAFETY: the caller's.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn store_masked(m: __mmask16, p: *mut f32, v: __m512) {
        // SAFETY: the caller's; masked-off lanes are not written.
        unsafe { _mm512_mask_storeu_ps(p, m, v) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        _mm512_mul_ps(a, b)
    }
    #[inline(always)]
    unsafe fn and(a: __m512, b: __m512) -> __m512 {
        // The integer form is AVX-512F's own (the float one is DQ's).
        _mm512_castsi512_ps(_mm512_and_si512(
            _mm512_castps_si512(a),
            _mm512_castps_si512(b),
        ))
    }
    #[inline(always)]
    unsafe fn max(a: __m512, b: __m512) -> __m512 {
        _mm512_max_ps(a, b)
    }
    #[inline(always)]
    unsafe fn min(a: __m512, b: __m512) -> __m512 {
        _mm512_min_ps(a, b)
    }
    #[inline(always)]
    unsafe fn where_greater(v: __m512, held: __m512, then: __m512, otherwise: __m512) -> __m512 {
        let greater = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, held);
        _mm512_mask_blend_ps(greater, otherwise, then)
    }
    #[inline(always)]
    unsafe fn load_masked_or(m: __mmask16, fill: __m512, p: *const f32) -> __m512 {
        // SAFETY: the caller's; masked-off lanes are not read.
        unsafe { _mm512_mask_loadu_ps(fill, m, p) }
    }
    #[inline(always)]
    unsafe fn even(lo: __m512, hi: __m512) -> __m512 {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        _mm512_permutex2var_ps(lo, even, hi)
    }
    #[inline(always)]
    unsafe fn odd(lo: __m512, hi: __m512) -> __m512 {
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        _mm512_permutex2var_ps(lo, odd, hi)
    }
    #[inline(always)]
    unsafe fn shift_in(a: __m512, b: __m512) -> __m512 {
        _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
            _mm512_castps_si512(b),
            _mm512_castps_si512(a),
        ))
    }
    #[inline(always)]
    unsafe fn shift_up(a: __m512, b: __m512) -> __m512 {
        _mm512_castsi512_ps(_mm512_alignr_epi32::<15>(
            _mm512_castps_si512(b),
            _mm512_castps_si512(a),
        ))
    }
    #[inline(always)]
    unsafe fn reduce_add(v: __m512) -> f32 {
        _mm512_reduce_add_ps(v)
    }
    #[inline(always)]
    unsafe fn transpose_columns(
        panel: &mut [f32],
        column: impl Fn(usize) -> *const f32,
        kc: usize,
        cols: usize,
    ) {
        // SAFETY: the caller's, and AVX-512 F is enabled here.
        unsafe { transpose_columns_avx512(panel, column, kc, cols) }
    }
}

// Each method is one instruction whose contract is the method's own.
#[allow(unsafe_op_in_unsafe_fn)]
impl Lanes for Avx2 {
    const N: usize = 8;
    const ISA: Isa = Isa::Avx2;
    // Two registers a row of 8: 6 rows are 12 sums, with B's two loads
    // and A's broadcast 15 of the 16 registers.
    const TILE_ROWS: [usize; 3] = [4, 5, 6];
    type V = __m256;
    type M = Avx2Mask;

    #[inline(always)]
    unsafe fn enabled<R>(f: impl FnOnce() -> R) -> R {
        // SAFETY: the caller found AVX2 and FMA.
        unsafe { super::isa::x86::avx2(f) }
    }
    #[inline(always)]
    unsafe fn first(n: usize) -> Avx2Mask {
        let n = n.min(8);
        let lanes = _mm256_cmpgt_epi32(
            _mm256_set1_epi32(n as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        );
        Avx2Mask { n, lanes }
    }
    #[inline(always)]
    fn whole(m: Avx2Mask) -> bool {
        m.n == 8
    }
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        _mm256_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: the caller's.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_masked(m: Avx2Mask, p: *const f32) -> __m256 {
        // A whole register is a plain load (a masked one takes one load
        // port on AMD's cores, a plain one any of them).
        // SAFETY: the caller's; `maskload` reads no masked-off lane.
        unsafe {
            match m.n {
                8 => _mm256_loadu_ps(p),
                0 => _mm256_setzero_ps(),
                _ => _mm256_maskload_ps(p, m.lanes),
            }
        }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        // SAFETY: the caller's.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn store_masked(m: Avx2Mask, p: *mut f32, v: __m256) {
        // A masked store is microcoded on AMD's cores (about 20 cycles on
        // a Zen 3); the edge is stored as a half, a quarter and a value,
        // as the bits of its length say. Through a copy on the stack and
        // a store a value, the edge took about 15 cycles there, against 4.
        // MobileNet-SSD on one Zen 3 core (2026-12-04, medians of 8
        // alternating runs): its 3 x 3 depthwise layers 3-12% faster
        // (128 x 75 x 75 0.509 -> 0.459 ms), the pass 34.2 -> 33.5 ms.
        // SAFETY: the caller's; only the first `n` values are written.
        unsafe {
            if m.n == 8 {
                _mm256_storeu_ps(p, v);
                return;
            }
            let (mut p, mut x) = (p, _mm256_castps256_ps128(v));
            if m.n & 4 != 0 {
                _mm_storeu_ps(p, x);
                x = _mm256_extractf128_ps::<1>(v);
                p = p.add(4);
            }
            if m.n & 2 != 0 {
                _mm_storel_epi64(p.cast(), _mm_castps_si128(x));
                x = _mm_movehl_ps(x, x);
                p = p.add(2);
            }
            if m.n & 1 != 0 {
                _mm_store_ss(p, x);
            }
        }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn mul(a: __m256, b: __m256) -> __m256 {
        _mm256_mul_ps(a, b)
    }
    #[inline(always)]
    unsafe fn and(a: __m256, b: __m256) -> __m256 {
        _mm256_and_ps(a, b)
    }
    #[inline(always)]
    unsafe fn max(a: __m256, b: __m256) -> __m256 {
        _mm256_max_ps(a, b)
    }
    #[inline(always)]
    unsafe fn min(a: __m256, b: __m256) -> __m256 {
        _mm256_min_ps(a, b)
    }
    #[inline(always)]
    unsafe fn where_greater(v: __m256, held: __m256, then: __m256, otherwise: __m256) -> __m256 {
        let greater = _mm256_cmp_ps::<_CMP_GT_OQ>(v, held);
        _mm256_blendv_ps(otherwise, then, greater)
    }
    #[inline(always)]
    unsafe fn load_masked_or(m: Avx2Mask, fill: __m256, p: *const f32) -> __m256 {
        // SAFETY: the caller's; masked-off lanes are not read.
        unsafe {
            if m.n == 8 {
                _mm256_loadu_ps(p)
            } else {
                let v = Self::load_masked(m, p);
                _mm256_blendv_ps(fill, v, _mm256_castsi256_ps(m.lanes))
            }
        }
    }
    #[inline(always)]
    unsafe fn even(lo: __m256, hi: __m256) -> __m256 {
        // Values 0 2 8 10 | 4 6 12 14 within the 128-bit halves, then the
        // 64-bit pairs put in order.
        let pairs = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(
            pairs,
        )))
    }
    #[inline(always)]
    unsafe fn odd(lo: __m256, hi: __m256) -> __m256 {
        let pairs = _mm256_shuffle_ps::<0b11_01_11_01>(lo, hi);
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(
            pairs,
        )))
    }
    #[inline(always)]
    unsafe fn shift_in(a: __m256, b: __m256) -> __m256 {
        // a's high half and b's low one, then each 128-bit half of that
        // behind a's by one lane.
        let middle = _mm256_castps_si256(_mm256_permute2f128_ps::<0x21>(a, b));
        _mm256_castsi256_ps(_mm256_alignr_epi8::<4>(middle, _mm256_castps_si256(a)))
    }
    #[inline(always)]
    unsafe fn shift_up(a: __m256, b: __m256) -> __m256 {
        // a's high half and b's low one, then each 128-bit half of b
        // behind that's by one lane.
        let middle = _mm256_castps_si256(_mm256_permute2f128_ps::<0x21>(a, b));
        _mm256_castsi256_ps(_mm256_alignr_epi8::<12>(_mm256_castps_si256(b), middle))
    }
    #[inline(always)]
    unsafe fn reduce_add(v: __m256) -> f32 {
        let four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let two = _mm_add_ps(four, _mm_movehl_ps(four, four));
        _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps::<1>(two, two)))
    }
    #[inline(always)]
    unsafe fn transpose_columns(
        panel: &mut [f32],
        column: impl Fn(usize) -> *const f32,
        kc: usize,
        cols: usize,
    ) {
        // SAFETY: the caller's, and AVX2 is enabled there.
        unsafe { transpose_columns_avx2(panel, column, kc, cols) }
    }
}

/// [`Lanes::transpose_columns`] on AVX2: blocks of 8 columns by 8 rows
/// loaded as 8 column runs, transposed in registers and stored as 8
/// panel rows.
///
/// # Safety
/// AVX2 is available; as [`Lanes::transpose_columns`].
#[target_feature(enable = "avx2,fma")]
unsafe fn transpose_columns_avx2(
    panel: &mut [f32],
    column: impl Fn(usize) -> *const f32,
    kc: usize,
    cols: usize,
) {
    const NR: usize = super::PANEL_COLUMNS;
    for j0 in (0..NR).step_by(8) {
        for p0 in (0..kc).step_by(8) {
            let depth = (kc - p0).min(8);
            // SAFETY: AVX2 is enabled here.
            let mask = unsafe { Avx2::first(depth) };
            let runs: [__m256; 8] = std::array::from_fn(|jj| {
                if j0 + jj < cols {
                    // SAFETY: values p0..p0 + depth of column j0 + jj are
                    // inside the block; the mask keeps the rest unread.
                    unsafe { Avx2::load_masked(mask, column(j0 + jj).add(p0)) }
                } else {
                    _mm256_setzero_ps()
                }
            });
            // SAFETY: AVX2 is enabled here.
            let rows = unsafe { transpose8(runs) };
            for (pp, row) in rows.iter().enumerate().take(depth) {
                // SAFETY: row p0 + pp < kc of the panel holds NR values,
                // of which these 8 start at j0.
                unsafe { _mm256_storeu_ps(panel.as_mut_ptr().add((p0 + pp) * NR + j0), *row) };
            }
        }
    }
}

/// The 8 x 8 transpose of `r`: lane `j` of output `i` is lane `i` of
/// input `j`.
///
/// # Safety
/// AVX is enabled where it is inlined ([`Avx2::enabled`]).
#[inline(always)]
pub(crate) unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    // SAFETY: the caller's.
    unsafe {
        // Pairs interleaved by 32 bits, then by 64: each 128-bit half
        // holds a 4 x 4 block transposed; then the halves are swapped.
        let t: [__m256; 8] = std::array::from_fn(
            #[inline(always)]
            |i| {
                let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
                if i % 2 == 0 {
                    _mm256_unpacklo_ps(a, b)
                } else {
                    _mm256_unpackhi_ps(a, b)
                }
            },
        );
        let u: [__m256; 8] = std::array::from_fn(
            #[inline(always)]
            |i| {
                let base = i / 4 * 4;
                let (a, b) = (t[base + i % 4 / 2], t[base + i % 4 / 2 + 2]);
                let (a, b) = (_mm256_castps_pd(a), _mm256_castps_pd(b));
                _mm256_castpd_ps(if i % 2 == 0 {
                    _mm256_unpacklo_pd(a, b)
                } else {
                    _mm256_unpackhi_pd(a, b)
                })
            },
        );
        std::array::from_fn(
            #[inline(always)]
            |i| {
                let (a, b) = (u[i % 4], u[i % 4 + 4]);
                if i < 4 {
                    _mm256_permute2f128_ps::<0x20>(a, b)
                } else {
                    _mm256_permute2f128_ps::<0x31>(a, b)
                }
            },
        )
    }
}

/// [`Lanes::transpose_columns`] on AVX-512: blocks of 16 columns by 16
/// rows loaded as 16 column runs, transposed in registers and stored as
/// 16 panel rows.
///
/// # Safety
/// AVX-512 F is available; as [`Lanes::transpose_columns`].
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn transpose_columns_avx512(
    panel: &mut [f32],
    column: impl Fn(usize) -> *const f32,
    kc: usize,
    cols: usize,
) {
    const NR: usize = super::PANEL_COLUMNS;
    for half in 0..NR / 16 {
        let j0 = half * 16;
        for p0 in (0..kc).step_by(16) {
            let depth = (kc - p0).min(16);
            let mask = ((1u32 << depth) - 1) as __mmask16;
            let runs: [__m512; 16] = std::array::from_fn(|jj| {
                if j0 + jj < cols {
                    // SAFETY: values p0..p0 + depth of column j0 + jj are
                    // inside the block; the mask keeps the rest unread.
                    unsafe { _mm512_maskz_loadu_ps(mask, column(j0 + jj).add(p0)) }
                } else {
                    _mm512_setzero_ps()
                }
            });
            let rows = transpose16(runs);
            for (pp, row) in rows.iter().enumerate().take(depth) {
                // SAFETY: row p0 + pp < kc of the panel holds NR values,
                // of which this half's 16 start at j0.
                unsafe { _mm512_storeu_ps(panel.as_mut_ptr().add((p0 + pp) * NR + j0), *row) };
            }
        }
    }
}

/// The 16 x 16 transpose of `rows`: lane `j` of output `i` is lane `i`
/// of input `j`.
#[target_feature(enable = "avx512f")]
pub(crate) fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    // Pairs of rows interleaved by 32 bits, then by 64: each 128-bit
    // lane holds a 4 x 4 block transposed.
    let t: [__m512; 16] = std::array::from_fn(|i| {
        let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_ps(a, b)
        } else {
            _mm512_unpackhi_ps(a, b)
        }
    });
    let u: [__m512; 16] = std::array::from_fn(|i| {
        let base = i / 4 * 4;
        let (a, b) = (t[base + i % 4 / 2], t[base + i % 4 / 2 + 2]);
        let (a, b) = (_mm512_castps_pd(a), _mm512_castps_pd(b));
        _mm512_castpd_ps(if i % 2 == 0 {
            _mm512_unpacklo_pd(a, b)
        } else {
            _mm512_unpackhi_pd(a, b)
        })
    });
    // Then the 128-bit lanes, twice.
    let v: [__m512; 16] = std::array::from_fn(|i| {
        let base = i / 8 * 8;
        let (a, b) = (u[base + i % 4], u[base + i % 4 + 4]);
        if i % 8 < 4 {
            _mm512_shuffle_f32x4::<0x88>(a, b)
        } else {
            _mm512_shuffle_f32x4::<0xdd>(a, b)
        }
    });
    std::array::from_fn(|i| {
        let (a, b) = (v[i % 8], v[i % 8 + 8]);
        if i < 8 {
            _mm512_shuffle_f32x4::<0x88>(a, b)
        } else {
            _mm512_shuffle_f32x4::<0xdd>(a, b)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose16_moves_lane_j_of_row_i_to_lane_i_of_row_j() {
        if !Isa::Avx512.is_available() {
            return;
        }
        let values: Vec<f32> = (0..256).map(|v| v as f32).collect();
        // SAFETY: AVX-512 F is there; each row reads 16 of the 256.
        let out = unsafe {
            Avx512::enabled(|| {
                let rows = std::array::from_fn(|i| _mm512_loadu_ps(values.as_ptr().add(16 * i)));
                transpose16(rows)
            })
        };
        for (i, row) in out.iter().enumerate() {
            let mut lanes = [0f32; 16];
            // SAFETY: `lanes` holds 16 values.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), *row) };
            let want: Vec<f32> = (0..16).map(|j| (16 * j + i) as f32).collect();
            assert_eq!(lanes.to_vec(), want, "row {i}");
        }
    }

    #[test]
    fn transpose8_moves_lane_j_of_row_i_to_lane_i_of_row_j() {
        if !Isa::Avx2.is_available() {
            return;
        }
        let values: Vec<f32> = (0..64).map(|v| v as f32).collect();
        let mut out = [[0f32; 8]; 8];
        // SAFETY: AVX2 is there; each row reads 8 of the 64 and writes 8.
        unsafe {
            Avx2::enabled(|| {
                let rows = std::array::from_fn(|i| _mm256_loadu_ps(values.as_ptr().add(8 * i)));
                for (row, v) in out.iter_mut().zip(transpose8(rows)) {
                    _mm256_storeu_ps(row.as_mut_ptr(), v);
                }
            })
        };
        for (i, row) in out.iter().enumerate() {
            let want: Vec<f32> = (0..8).map(|j| (8 * j + i) as f32).collect();
            assert_eq!(row.to_vec(), want, "row {i}");
        }
    }

    #[test]
    fn shifts_move_the_lanes_one_down_or_up_across_two_registers() {
        fn check<L: Lanes>() {
            if !L::ISA.is_available() {
                return;
            }
            let values: Vec<f32> = (0..2 * L::N).map(|v| v as f32).collect();
            let (mut down, mut up) = (vec![0f32; L::N], vec![0f32; L::N]);
            // SAFETY: the family is there; 2 N values read, N written to
            // each.
            unsafe {
                Available::<L>::new().run(|| {
                    let (a, b) = (L::load(values.as_ptr()), L::load(values.as_ptr().add(L::N)));
                    L::store(down.as_mut_ptr(), L::shift_in(a, b));
                    L::store(up.as_mut_ptr(), L::shift_up(a, b));
                })
            };
            assert_eq!(down, values[1..=L::N], "{}: shift_in", L::ISA);
            assert_eq!(up, values[L::N - 1..2 * L::N - 1], "{}: shift_up", L::ISA);
        }
        check::<Avx512>();
        check::<Avx2>();
    }

    #[test]
    fn even_and_odd_lanes_pull_two_registers_apart() {
        let values: Vec<f32> = (0..32).map(|v| v as f32).collect();
        fn check<L: Lanes>(values: &[f32]) {
            if !L::ISA.is_available() {
                return;
            }
            let mut out = vec![0f32; 2 * L::N];
            // SAFETY: the family is there; 2 N values each side.
            unsafe {
                Available::<L>::new().run(|| {
                    let (lo, hi) = (L::load(values.as_ptr()), L::load(values.as_ptr().add(L::N)));
                    L::store(out.as_mut_ptr(), L::even(lo, hi));
                    L::store(out.as_mut_ptr().add(L::N), L::odd(lo, hi));
                })
            };
            let want: Vec<f32> = (0..L::N)
                .map(|i| 2.0 * i as f32)
                .chain((0..L::N).map(|i| 2.0 * i as f32 + 1.0))
                .collect();
            assert_eq!(out, want, "{}", L::ISA);
        }
        check::<Avx512>(&values);
        check::<Avx2>(&values);
    }

    #[test]
    fn avx2_masks_read_and_write_only_their_lanes() {
        if !Isa::Avx2.is_available() {
            return;
        }
        let src: Vec<f32> = (1..=8).map(|v| v as f32).collect();
        for n in 0..=8 {
            let mut dst = [-1f32; 8];
            // SAFETY: AVX2 is there; 8 values each side.
            let sum = unsafe {
                Avx2::enabled(|| {
                    let m = Avx2::first(n);
                    let v = Avx2::load_masked(m, src.as_ptr());
                    Avx2::store_masked(m, dst.as_mut_ptr(), v);
                    Avx2::reduce_add(v)
                })
            };
            let want: f32 = (1..=n).map(|v| v as f32).sum();
            assert_eq!(sum, want, "{n} lanes");
            assert!(dst[..n].iter().zip(&src).all(|(d, s)| d == s), "{n}");
            assert!(dst[n..].iter().all(|&d| d == -1.0), "{n}");
        }
    }
}
