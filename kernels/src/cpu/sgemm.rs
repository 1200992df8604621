//! f32 gemm on AVX-512 and on AVX2 + FMA for the products of small
//! layers, written once over [`Lanes`].
//!
//! matrixmultiply packs both operands into its own layout before every
//! product. For the shallow or short products of small layers (LeNet's
//! 20 x 576 x 25, MTCNN's 16-32 rows) that packing costs as much as the
//! multiply-adds. This kernel reads A through its strides and B in place
//! (packing B only when its columns are not adjacent, or when a deep,
//! wide B would otherwise thrash L1), keeps a tile of C of two registers
//! a row in registers (8-12 rows of 32 on AVX-512, 4-6 rows of 16 on
//! AVX2, twice across each panel of [`NR`] columns; on AVX-512, where C
//! is written afresh, 5-6 rows of 64 across two panels), and handles every
//! edge with lane masks, so any shape runs the one kernel. [`suits`]
//! keeps it to the shapes where it measured faster.
//!
//! Every value of C is the same chain of multiply-adds along the depth on
//! either family (the tiles differ, not the sums), so the two give the
//! same bits; [`dots`] adds each dot's lanes at its end, which differs
//! between widths.
//!
//! Products whose operands both run along a long depth into a small C
//! (a convolution's weight gradient) are [`dots`] instead: no panel to
//! pack or transpose.
//!
//! One call runs on one thread; `cpu::gemm` cuts large products into
//! pieces first. The order of the additions is fixed by the shape alone,
//! so a run repeats bit for bit.

use std::arch::x86_64::_mm_prefetch;
use std::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _MM_HINT_T1};
use std::cell::RefCell;
use std::ops::Range;

use super::aligned_vec::AlignedVec;
use super::finish::{Rectifier, RowFinish, finished, rectified};
use super::lanes::{Available, Avx2, Avx512, Lanes};
use super::{Isa, isa};

/// Columns of a panel of B: two AVX-512 registers, four AVX2 ones.
const NR: usize = super::PANEL_COLUMNS;
/// Depth of one block of a product deeper than [`ONE_BLOCK_DEPTH`]
/// ([`depth_block`]): a `KC x NR` panel of B (64 KiB)
/// stays in L2 while C's rows pass over it. At 256 (a panel of 32 KiB,
/// all of L1 with no room for A's rows) each tile of C was read and
/// written again for every 256 of the depth; at 512, one Zen 4 core,
/// batch 1 unless the net declares more, medians of 5 alternating runs,
/// AVX-512 / AVX2 (2026-12-01): 512 x 361 x 512 (MobileNet-SSD's 1x1
/// layers at 19 x 19) 1.82 -> 1.77 / 2.04 -> 1.90 ms, MobileNet-SSD 27.3 ->
/// 26.4 / 29.2 -> 28.5, ResNet-50 66.4 -> 65.9 / 75.2 -> 74.5, CaffeNet
/// (10 images) 101.7 -> 99.0 / 111.7 -> 107.2, darknet19 144.7 -> 137.2 /
/// 173.4 -> 168.2, YOLOv3-tiny 34.4 -> 32.6 / 40.5 -> 39.1; 3x3 layers
/// ran level. At 1024, level or 0.3% slower.
const KC: usize = 512;
/// The smallest B, in values, read in place whose next panel the first
/// tile of each panel asks for (1 MiB of f32: smaller ones stay in L2
/// across a layer's tiles), but see [`FEW_TILES_AHEAD_MIN`].
const IN_PLACE_AHEAD_MIN: usize = 1 << 18;

/// The smallest B, in values (256 KiB of f32), read in place whose next
/// panel is asked for where C is at most two tiles high: so few tiles
/// read each panel that their time is the panel's fetch, and a B that
/// fits L2 may still come from beyond it (an SSD's box layers read a
/// feature map written a dozen layers before). MobileNet-SSD's
/// conv11_mbox_loc (12 x 361 x 512) on one Zen 3 core (AVX2,
/// 2026-12-04, medians of 6 alternating runs in the net): 0.279 -> 0.134
/// ms. Asked for at every C of 64 KiB of B and more, ResNet-50's
/// res2a_branch2a (64 x 3,136 x 64) ran 22% slower and SqueezeNet's
/// expand1x1 layers of 64 rows 16-18% slower.
const FEW_TILES_AHEAD_MIN: usize = 1 << 16;

/// Rows of C a tile takes for an `m`-row product: of the heights
/// `L::TILE_ROWS` (8, 10 or 12 on AVX-512; 4, 5 or 6 on AVX2), on
/// AVX-512 the one that leaves the fewest rows of the last tile unused
/// (ties to the lower), so LeNet's 20 and 50 channels fill every tile.
pub(super) fn rows_per_tile<L: Lanes>(m: usize) -> usize {
    if L::ISA == Isa::Avx2 {
        // AVX2's 4-row tile has 8 sums in flight, barely the multiply-add's
        // latency on two pipes: the height is the one with the fewest
        // steps, a tile's step costing its rows and one more (its loads
        // and the loop), so 6 where the rows are many.
        return L::TILE_ROWS
            .into_iter()
            .min_by_key(|&r| m.div_ceil(r) * (r + 1))
            .unwrap_or(L::TILE_ROWS[0]);
    }
    L::TILE_ROWS
        .into_iter()
        .min_by_key(|&r| m.next_multiple_of(r) - m)
        .unwrap_or(L::TILE_ROWS[0])
}

/// [`rows_per_tile`] for the family [`isa`] chose (AVX-512's heights on
/// the baseline, where no tile runs).
fn rows_per_tile_here(m: usize) -> usize {
    match isa() {
        Isa::Avx2 => rows_per_tile::<Avx2>(m),
        _ => rows_per_tile::<Avx512>(m),
    }
}

/// Whether the kernels of this module run here: AVX2 and FMA at least.
fn runs_here() -> bool {
    isa() >= Isa::Avx2
}

/// Whether this kernel is the faster one for an `m x n` product of depth
/// `k`. Measured on a Zen 5 core (one thread, 2026-11-24), against
/// matrixmultiply: LeNet's conv1/conv2 gemms 1.57x/1.54x, MTCNN's
/// convolutions 1.10x-1.39x (O-Net's conv3 64 x 64 x 576 1.39x, conv4
/// 128 x 9 x 256 1.25x), where matrixmultiply's packing costs as much as
/// the product.
///
/// Large products too, up to [`C_MAX`] values of C (2026-11-27, Zen 5,
/// after the kernel learned to read ahead and to fill 10- and 12-row
/// tiles; one thread / two): 512 x 361 x 512 (MobileNet-SSD's 1x1 layers
/// at 19 x 19) 1.09x / 1.12x, 256 x 1024 x 256 1.17x / 1.19x, 1024^3
/// 1.06x / 1.15x, 4096 x 256 x 1024 1.13x / 1.25x; in the nets at batch
/// 1, MobileNet-SSD's 1x1 layers at 38 x 38 and 19 x 19 1.20x-1.27x,
/// ResNet-50's at 56 x 56 and 28 x 28 1.05x-1.44x.
///
/// A transposed B (an inner product's weights) is packed 16 x 16 through
/// registers, which beat matrixmultiply's packing at every size measured
/// (2026-11-26, one thread): CaffeNet's fc6 at batch 10 (10 x 4096 x
/// 9216) 2.14x, at batch 4 2.88x, LeNet's ip1 at batch 64 1.23x, 256 x
/// 1024 x 1024 1.14x, 128 x 4096 x 4096 1.12x.
pub(crate) fn suits(m: usize, n: usize, k: usize, b_transposed: bool) -> bool {
    b_transposed || m < 64 || k < 128 || n < 256 || m * n <= C_MAX
}

/// The most values of C [`suits`] gives this kernel beyond the small
/// shapes. It reads and writes each tile of C once a depth block of
/// [`KC`], and C beyond a few MB comes from memory each time, where
/// matrixmultiply's blocking keeps it in cache: 2048^3 ran at 0.85x of
/// matrixmultiply on one core (a C of 4 M values), 0.95x on two (2 M
/// a core); 64 x 50176 x 147 0.93x on one.
const C_MAX: usize = 1 << 20;

/// Whether [`dots`] takes the product: A's rows and B's columns each
/// adjacent along a long depth, into a small C (a convolution's weight
/// gradient over many pixels: LeNet's conv1, 20 x 25 of depth 5184 a
/// round of 9 images, where packing B's 25 columns 32 wide and
/// transposing them cost more than the products).
///
/// And a C of a few columns ([`DOTS_FEW_COLUMNS`]) over a depth of
/// [`DOTS_FEW_MIN_DEPTH`] or more, of any height: a convolution onto a
/// 1 x 1, 2 x 2 or 3 x 3 output (SSD's last extra layers), its A the
/// weights, read once where they lie, row after row, rather than packed
/// into 32-wide panels for a C a few columns wide.
fn dots_suit(m: usize, n: usize, k: usize, sa: [isize; 2], sb: [isize; 2]) -> bool {
    let small_c = k >= DOTS_MIN_DEPTH && m <= DOTS_MAX_SIDE && n <= DOTS_MAX_SIDE;
    let few_columns = n <= DOTS_FEW_COLUMNS && k >= DOTS_FEW_MIN_DEPTH;
    sa[1] == 1 && sb[0] == 1 && (small_c || few_columns)
}

/// The most columns of C [`dots_suit`] takes at any height. MobileNet-SSD's
/// last three 3 x 3 stride-2 layers in the net, batch 1, one Intel core
/// (2026-12-03, medians of 6 alternating runs, AVX-512 / AVX2 ms), as
/// dots against the packed products, each with its own im2col: 128 x 1 x
/// 576 0.077 -> 0.041 / 0.080 -> 0.041, 256 x 4 x 1152 0.158 -> 0.123 /
/// 0.187 -> 0.151, 256 x 9 x 1152 0.178 -> 0.174 / 0.243 -> 0.186; 512 x
/// 25 x 2304 ran slower as dots (0.92 -> 0.96 ms).
pub(crate) const DOTS_FEW_COLUMNS: usize = 9;
/// The least depth at which [`DOTS_FEW_COLUMNS`] columns are taken as dots.
pub(crate) const DOTS_FEW_MIN_DEPTH: usize = 256;

/// The depth from which a product of dots beats packing B: each dot's
/// 16 lanes are summed once at its end.
const DOTS_MIN_DEPTH: usize = 2048;
/// The largest C side [`dots`] takes (beyond it, the packed kernel's
/// reuse of each loaded value wins).
const DOTS_MAX_SIDE: usize = 64;
/// `c = alpha * a * b + beta * c` as `m x n` dot products of A's rows
/// and B's columns, each `k` adjacent values (`lda` and `ldb` apart),
/// `T x T` at a time (4 x 4 dots in 16 AVX-512 registers, 8 loads for 16
/// multiply-adds a step; 3 x 3 in AVX2's 16), a register of lanes each,
/// a masked step for the depth's tail. Each dot adds its lanes once, at
/// its end, in an order fixed by the build, so a run repeats bit for
/// bit. With `beta == 0`, `c` is never read.
///
/// A's rows (a net's weights, from beyond the caches) each start a new
/// stream of 2-5 KiB that the hardware's prefetch picks up late: the
/// first tile of each group of rows asks for the next group's, a line
/// a step. MobileNet-SSD's conv15_2 (256 x 9 x 1152) and conv16_2 (256
/// x 4 x 1152) in the net, one Zen 5 core (2026-12-05, one build with
/// and without, medians of 5-8 alternating runs, ms): AVX-512 0.083-0.101
/// -> 0.066-0.079 and 0.061-0.075 -> 0.042-0.053, AVX2 0.125 -> 0.083 and
/// 0.105 -> 0.064.
///
/// # Safety
/// `L`'s instructions are enabled; rows `0..m` of A and columns `0..n`
/// of B hold `k` readable values each; C's `m x n` values (rows `ldc`
/// apart) are written by no one else and alias neither.
#[inline(always)]
unsafe fn dots<L: Lanes, const T: usize>(
    (m, k, n): (usize, usize, usize),
    alpha: f32,
    (a, lda): (*const f32, isize),
    (b, ldb): (*const f32, isize),
    beta: f32,
    (c, ldc): (*mut f32, isize),
) {
    // SAFETY: `L`'s instructions are enabled, per the caller.
    let tail = unsafe { L::first(k % L::N) };
    for i0 in (0..m).step_by(T) {
        // A tile past C's edge repeats its last row or column and
        // stores nothing for it.
        let rows: [*const f32; T] =
            std::array::from_fn(|r| a.wrapping_offset((i0 + r).min(m - 1) as isize * lda));
        for j0 in (0..n).step_by(T) {
            let cols: [*const f32; T] =
                std::array::from_fn(|q| b.wrapping_offset((j0 + q).min(n - 1) as isize * ldb));
            // SAFETY: as above.
            let mut acc = [[unsafe { L::zero() }; T]; T];
            let body = k - k % L::N;
            // SAFETY: as above.
            let whole = unsafe { L::first(L::N) };
            // SAFETY: values p..p + N of each row and column, those the
            // mask keeps, are inside them (p + N <= k, or the tail's
            // mask); `L`'s instructions are enabled, per the caller.
            unsafe {
                if j0 == 0 && i0 + T < m {
                    // The first tile of a group of A's rows asks for the
                    // next group's as it reads its own (see below).
                    let next: [*const f32; T] = std::array::from_fn(|r| {
                        a.wrapping_offset((i0 + T + r).min(m - 1) as isize * lda)
                    });
                    for p in (0..body).step_by(L::N) {
                        for row in next {
                            // A prefetch reads nothing.
                            _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(p) as *const i8);
                        }
                        dot_step::<L, T>(&mut acc, (&rows, &cols), p, whole);
                    }
                } else {
                    for p in (0..body).step_by(L::N) {
                        dot_step::<L, T>(&mut acc, (&rows, &cols), p, whole);
                    }
                }
                if k % L::N != 0 {
                    dot_step::<L, T>(&mut acc, (&rows, &cols), body, tail);
                }
            }
            for (r, acc) in acc.iter().enumerate().take(m - i0) {
                for (q, &v) in acc.iter().enumerate().take(n - j0) {
                    // SAFETY: as above.
                    let sum = alpha * unsafe { L::reduce_add(v) };
                    // SAFETY: (i0 + r, j0 + q) is inside C.
                    unsafe {
                        let at = c.offset((i0 + r) as isize * ldc + (j0 + q) as isize);
                        *at = if beta == 0.0 { sum } else { sum + beta * *at };
                    }
                }
            }
        }
    }
}

/// One step of [`dots`]: values `p..p + N` (those `mask` keeps) of each
/// of the tile's rows and columns, multiplied into its sums. A function,
/// not a closure: a closure in generic code is compiled without the
/// family's instructions, and its intrinsics were left as calls.
///
/// # Safety
/// `L`'s instructions are enabled; the kept values are inside the rows
/// and columns.
#[inline(always)]
unsafe fn dot_step<L: Lanes, const T: usize>(
    acc: &mut [[L::V; T]; T],
    (rows, cols): (&[*const f32; T], &[*const f32; T]),
    p: usize,
    mask: L::M,
) {
    let mut x = [acc[0][0]; T];
    let mut y = [acc[0][0]; T];
    for r in 0..T {
        // SAFETY: the caller's.
        x[r] = unsafe { L::load_masked(mask, rows[r].add(p)) };
        // SAFETY: the caller's.
        y[r] = unsafe { L::load_masked(mask, cols[r].add(p)) };
    }
    for r in 0..T {
        for q in 0..T {
            // SAFETY: the caller's.
            acc[r][q] = unsafe { L::fmadd(x[r], y[q], acc[r][q]) };
        }
    }
}

thread_local! {
    /// The pack of a transposed B, kept between calls so a net's gemms
    /// never allocate.
    static PACK: RefCell<AlignedVec<f32>> = const { RefCell::new(AlignedVec::new()) };
}

/// Writes rows `rows` and columns `cols` of a B that exists nowhere as a
/// matrix into a panel, row `p` of them at `panel[p * PANEL_COLUMNS..]`
/// (`NR` values; those past `cols` in a row are never read).
pub(crate) type FilledB<'f> = &'f mut dyn FnMut(Range<usize>, Range<usize>, &mut [f32]);

/// Where the kernel finds A's rows.
#[derive(Clone, Copy)]
enum Rows {
    /// A matrix at the pointer, with its [row, column] strides.
    Strided(*const f32, [isize; 2]),
    /// Copied in tiles of `mr` rows (those of [`rows_per_tile`]): tile
    /// `t` at `at + t depth mr`, `depth` runs of `mr` values, run `p`
    /// the tile's column `p`; a tile of another height (a narrow one,
    /// `2 mr` high) reads the `strided` matrix the tiles hold.
    Tiled {
        at: *const f32,
        depth: usize,
        mr: usize,
        strided: (*const f32, [isize; 2]),
    },
}

impl Rows {
    /// The same rows from column `p` on (the first `p` columns skipped).
    ///
    /// # Safety
    /// Column `p` is inside A (or one past its last, read by no one).
    unsafe fn past_columns(self, p: usize) -> Rows {
        // SAFETY: as the caller promises.
        unsafe {
            match self {
                Rows::Strided(a, sa) => Rows::Strided(a.offset(p as isize * sa[1]), sa),
                Rows::Tiled {
                    at,
                    depth,
                    mr,
                    strided: (a, sa),
                } => Rows::Tiled {
                    at: at.add(p * mr),
                    depth,
                    mr,
                    strided: (a.offset(p as isize * sa[1]), sa),
                },
            }
        }
    }

    /// The pointer and [row, column] strides a tile from row `i` reads:
    /// its tile where `tiled` (a tile of the pack's height, from a
    /// multiple of it), the matrix otherwise.
    ///
    /// # Safety
    /// Row `i` is inside A.
    unsafe fn tile(self, i: usize, tiled: bool) -> (*const f32, [isize; 2]) {
        // SAFETY: as the caller promises.
        unsafe {
            match self {
                Rows::Tiled { at, depth, mr, .. } if tiled => {
                    debug_assert_eq!(i % mr, 0, "a tile starts at a multiple of its height");
                    // i is a multiple of mr: tile i / mr, at i / mr * depth * mr.
                    (at.add(i * depth), [1, mr as isize])
                }
                Rows::Tiled {
                    strided: (a, sa), ..
                }
                | Rows::Strided(a, sa) => (a.offset(i as isize * sa[0]), sa),
            }
        }
    }
}

/// Where the kernel finds B.
enum Source<'f> {
    /// A matrix at the pointer, with its [row, column] strides.
    Matrix(*const f32, [isize; 2]),
    /// Panels a caller writes.
    Filled(FilledB<'f>),
    /// Panels packed beforehand (by [`pack_transposed`], or a caller's
    /// `blas::pack_panels`), for a B of the given depth; then the pack
    /// the caller multiplies next, laid out as this one (null where
    /// none), whose panels the last tiles ask for.
    Packed(*const f32, usize, *const f32),
}

/// `c = alpha * a * b + beta * c` for `a` of `m x k`, `b` of `k x n` and
/// `c` of `m x n`, each given by its [row, column] strides, where this
/// kernel is the faster one: on a machine with AVX-512 or AVX2 + FMA
/// ([`isa`]), for a C whose columns are adjacent and a shape it
/// [`suits`]. Says whether it
/// ran; matrixmultiply runs the rest. With `beta == 0`, `c` is never read.
///
/// # Safety
/// Every element the strides reach is inside its allocation; the
/// elements of `c` are written by no one else meanwhile and alias neither
/// `a` nor `b`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn run_if_suited(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: *const f32,
    sa: [isize; 2],
    b: *const f32,
    sb: [isize; 2],
    beta: f32,
    c: *mut f32,
    sc: [isize; 2],
) -> bool {
    if sc[1] != 1 || !runs_here() {
        return false;
    }
    if dots_suit(m, n, k, sa, sb) {
        let args = ((m, k, n), alpha, (a, sa[0]), (b, sb[1]), beta, (c, sc[0]));
        // SAFETY: as the caller promises; `dots_suit` checked that A's
        // rows and B's columns run along the depth; `runs_here` that the
        // family `isa` chose is one of these.
        return unsafe {
            match isa() {
                Isa::Avx512 => Avx512::dots(args),
                _ => Avx2::dots(args),
            }
        };
    }
    if !suits(m, n, k, sb[1] != 1) {
        return false;
    }
    // SAFETY: as the caller promises.
    unsafe {
        product_here(
            (m, k, n),
            alpha,
            (a, sa),
            Source::Matrix(b, sb),
            beta,
            (c, sc[0]),
            None,
        )
    }
}

/// Whether [`run_finished`] runs the `m x n` product of depth `k`: the
/// one [`run_if_suited`] runs through this kernel for a row-major A and
/// B (never its dots: a row-major B's columns are not adjacent).
pub(crate) fn finished_suits(m: usize, n: usize, k: usize) -> bool {
    runs_here() && k > 0 && m > 1 && n > 1 && suits(m, n, k, false)
}

/// `C = A B` for a row-major `m x k` A (rows `lda` apart) and `k x n` B
/// (rows `ldb` apart) into C (rows `ldc` apart), each value finished by
/// `finish` as the last depth block stores it: [`run_if_suited`]'s sums
/// for the same shape (where [`finished_suits`]), then `finish`'s, so
/// the bits of that product and a pass of `finish` after it.
///
/// # Safety
/// As [`run_if_suited`]; `finish`'s bias is readable for C's `m` rows;
/// [`finished_suits`] holds.
pub(crate) unsafe fn run_finished(
    (m, k, n): (usize, usize, usize),
    (a, lda): (*const f32, usize),
    (b, ldb): (*const f32, usize),
    (c, ldc): (*mut f32, usize),
    finish: Finish,
) {
    debug_assert!(finished_suits(m, n, k));
    // SAFETY: as the caller promises.
    unsafe {
        product_here(
            (m, k, n),
            1.0,
            (a, [lda as isize, 1]),
            Source::Matrix(b, [ldb as isize, 1]),
            0.0,
            (c, ldc as isize),
            Some(finish),
        )
    };
}

/// Whether [`run_filled`]'s `m x n` product of depth `k` is the one [`run_if_suited`] runs for that shape on this machine.
pub(crate) fn filled_suits(m: usize, n: usize, k: usize) -> bool {
    runs_here() && suits(m, n, k, false)
}

/// [`run_if_suited`] for a B that `fill` writes a panel at a time (a
/// convolution's im2col, taken straight from the image), `c` row-major
/// (`m x n`, rows `ldc` apart). Runs on an AVX-512 or AVX2 machine, any
/// shape, and says whether it ran.
///
/// # Safety
/// A's `m x k` elements at `a` with strides `sa` are readable; `c` holds
/// `m` rows of `n` values `ldc` apart, written by no one else meanwhile,
/// aliasing nothing `fill` reads.
pub(crate) unsafe fn run_filled(
    (m, k, n): (usize, usize, usize),
    (a, sa): (*const f32, [isize; 2]),
    fill: FilledB<'_>,
    beta: f32,
    (c, ldc): (*mut f32, usize),
) -> bool {
    // SAFETY: as the caller promises; every panel is one of `pack`.
    unsafe {
        product_here(
            (m, k, n),
            1.0,
            (a, sa),
            Source::Filled(fill),
            beta,
            (c, ldc as isize),
            None,
        )
    }
}

/// The share of a tiling's cells that hold values: `len` cut into
/// pieces of `piece`.
fn filled(len: usize, piece: usize) -> f64 {
    len as f64 / len.next_multiple_of(piece).max(1) as f64
}

/// Whether an `m x n` product of depth `k` runs faster as its transpose,
/// `C^T = B^T A^T`, with A packed beforehand ([`pack_transposed`]): where
/// C has too few columns for its panels of 32 and rows enough for the
/// transpose's (ResNet-50's 1x1 layers at 7 x 7, batch 1: 49 columns
/// fill 49 of 64 panel columns; the transpose's 49 rows, 49 of 50 tile
/// rows). C's columns stay below `suits`' bound, where `gemm` runs this
/// kernel: then the sums are the same, in the same order, so the bits
/// are `gemm`'s.
///
/// Measured layer by layer in the nets, one Zen 5 core (2026-11-27,
/// medians of 3-5 alternating runs, the pack made once): where the
/// transpose fills a fifth more of its tiles, 1.18x-1.26x (ResNet-50's
/// 1x1 layers at 7 x 7, MobileNet-SSD's at 10 x 10 and its heads, up to
/// 2.8x on 3 x 3 and 2 x 2 outputs); where it fills an eighth more (14 x
/// 14, 13 x 13), 0.94x-1.09x, and 0.71x-0.77x for SqueezeNet's
/// expand layers of depth 48-64.
///
/// Once its rows were read from tiles ([`run_transposed`]), products
/// both deep and tall gained where the transpose fills any more of its
/// tiles (one Zen 4 core, 2026-11-30, chains of 1x1 layers, each
/// layer's time): 1024 <-> 512 at 13 x 13 (YOLO's) 1.03x-1.12x on
/// AVX-512 (fills 1.13x), 1.04x-1.07x on AVX2 (1.01x); 512 <-> 1024 at 10
/// x 10 on AVX2 (1.10x) 1.12x; where one side is 256 or less, it lost or
/// tied (ResNet-50's res4 at 14 x 14 on AVX2, 0.93x; SqueezeNet's
/// layers at 13 x 13, 0.80x).
///
/// Since AVX-512's wide tiles ([`wide_panels`]) take C's pairs of panels
/// as they are, a C of two pairs or more ([`WIDE_PAIRS_BEAT_TRANSPOSE`]
/// columns) is left as it is there. One Intel core (2026-12-03, batch 1,
/// the same build with and without, medians of 8 alternating runs):
/// SqueezeNet's conv10 (1000 x 169 x 512) 1.21 -> 1.11 ms, its pass 4.51
/// -> 4.40; darknet19's 1x1 layers at 13 x 13 level; at 10 x 10 (one pair
/// and a narrow rest) the transpose stays faster (MobileNet-SSD's
/// conv14_1, 256 x 100 x 1024, 0.39 against 0.42 ms), as at 7 x 7
/// (ResNet-50's res5 1x1 layers, 0.87-0.96 against 1.06-1.34 ms).
///
/// Once the copy of B^T's columns wrote one stream ([`tile_columns_of`]),
/// products of 256 to 511 rows at least 512 deep gained from the
/// transpose too, where it fills any more of its tiles, against the wide
/// tiles as well (one Zen 4 core, 2026-12-06, the same build, the choice
/// switched at run time, medians of 5-7 runs, ms): alone, 256 x 100 x
/// 1024 on AVX2 0.562 -> 0.506, 256 x 196 x 1024 1.042 -> 0.993 on
/// AVX2 and 1.073 -> 0.987 on AVX-512, 256 x 169 x 512 on AVX-512 0.430
/// -> 0.416; in MobileNet-SSD, conv14_1 on AVX2 0.628 -> 0.603; in
/// ResNet-50, its res4 branch2a layers on AVX-512 1.11 -> 1.03, the pass
/// 59.0 -> 57.9. SqueezeNet's conv10 (1000 rows) stayed faster in wide
/// tiles (1.917 against 1.935).
///
/// On AVX2, where C as it is takes tiles of 6 rows of A read in place,
/// six streams of A against the transpose's one of tiled rows, products
/// from 256 deep gain too. One Zen 3 core, 2026-12-07, the choice
/// switched at run time, medians of 5-8 alternating runs, ms: a chain
/// of 256 -> 1024 and 1024 -> 256 layers at 14 x 14 (1024 x 196 x 256
/// and 256 x 196 x 1024), the first 1.61 -> 1.35-1.42; in ResNet-50 at
/// batch 1 its res4 branch2c layers (1024 x 196 x 256) 12-14% faster
/// against the layers the choice leaves alone (res2's and res3's
/// branch2c), on a machine whose passes wandered 88-139 ms.
pub(crate) fn transposed_suits(m: usize, n: usize, k: usize) -> bool {
    // A product at least 512 deep (256 on AVX2) with at least 256 rows
    // takes the transpose wherever it fills any more of its tiles; on
    // AVX-512, against C's pairs of panels too where it has fewer than
    // 512 rows.
    let deep = m >= 256 && k >= if isa() == Isa::Avx2 { 256 } else { 512 };
    if isa() == Isa::Avx512 && n >= WIDE_PAIRS_BEAT_TRANSPOSE && !(deep && m < 512) {
        return false;
    }
    // A tile is two registers wide: C's columns on AVX2 are computed 16
    // at a time.
    let width = if isa() == Isa::Avx2 { 2 * Avx2::N } else { NR };
    let as_is = filled(n, width) * filled(m, rows_per_tile_here(m));
    let transposed = filled(n, rows_per_tile_here(n)) * filled(m, width);
    runs_here()
        && k > 0
        && m > 1
        && n > 1
        && n < 256
        && (transposed >= 1.2 * as_is || deep && transposed > as_is)
}

/// The fewest columns of C, two pairs of panels, that [`transposed_suits`]
/// leaves to AVX-512's wide tiles (but for products of 256 to 511 rows,
/// 512 deep or more).
const WIDE_PAIRS_BEAT_TRANSPOSE: usize = 4 * NR;

/// Packs the row-major `m x k` A as the B of `C^T = B^T A^T`: panel `q`
/// (A's rows `32 q..32 q + 32`) holds `k` rows of `NR` values, row `p`
/// A's column `p`, zero past A's last row.
///
/// # Safety
/// The kernels run here ([`runs_here`]); `a` holds `m * k` values and
/// `packed` the `m.next_multiple_of(32) * k` of the pack.
pub(crate) unsafe fn pack_transposed(a: *const f32, (m, k): (usize, usize), packed: &mut [f32]) {
    for (q, panel) in packed
        .chunks_exact_mut(k * NR)
        .take(m.div_ceil(NR))
        .enumerate()
    {
        let cols = NR.min(m - q * NR);
        // SAFETY: rows q NR..q NR + cols of A hold k values each; the
        // kernels run here, per the caller.
        unsafe { transpose_columns_here(panel, |j| a.add((q * NR + j) * k), k, cols) };
    }
}

thread_local! {
    /// One panel's `C^T` in [`run_transposed`], kept between calls.
    static PANEL_OF_CT: RefCell<AlignedVec<f32>> = const { RefCell::new(AlignedVec::new()) };
    /// `B^T` in [`run_transposed`], its rows in tiles ([`Rows::Tiled`]),
    /// kept between calls.
    static TILED_ROWS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `C = A B` for the `rows` rows of A packed at `packed` by
/// [`pack_transposed`] (from one of its panels on) and a row-major `k x
/// n` B, into the row-major `rows x n` C at `c`: a panel of A's rows at a
/// time, its `C^T = B^T A^T` computed into a buffer that stays in L1 and
/// transposed into C's rows (a whole C^T first would be one more pass
/// over C through memory: 800 KB for ResNet-50's 1x1 layers at 14 x 14).
/// Panel by panel, the pack is read front to back.
///
/// `B^T`, the rows of every panel's product, is first copied into the
/// tiles the kernel reads ([`Rows::Tiled`]), once for all the panels:
/// read in place, each step of a tile took a value from each of its
/// rows, a cache line `4 n` bytes from the last, and on AVX2 (a tile of
/// 6 rows against AVX-512's 10, so 2.5 times the steps a product) that
/// stream is what the kernel waited on: a chain of four 1024 -> 1024
/// layers at 10 x 10 ran 1.16x-1.19x faster with the copy, on AVX-512
/// 1.01x-1.05x (one Zen 4 core, 2026-11-30).
///
/// # Safety
/// The kernels run here ([`runs_here`]); `packed` holds `rows.div_ceil(32)` panels of
/// `k * 32` values, `b` holds `k * n` values, `c` `rows * n`, written by
/// no one else and aliasing neither.
pub(crate) unsafe fn run_transposed(
    shape: (usize, usize, usize),
    packed: *const f32,
    b: *const f32,
    c: *mut f32,
) {
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512(shape: (usize, usize, usize), packed: *const f32, b: *const f32, c: *mut f32) {
        // SAFETY: the caller's, and the features are enabled.
        unsafe { transposed_panels::<Avx512>(shape, packed, b, c) }
    }
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2(shape: (usize, usize, usize), packed: *const f32, b: *const f32, c: *mut f32) {
        // SAFETY: the caller's, and the features are enabled.
        unsafe { transposed_panels::<Avx2>(shape, packed, b, c) }
    }
    // SAFETY: as the caller promises; each family runs only where `isa`
    // chose it.
    unsafe {
        match isa() {
            Isa::Avx512 => avx512(shape, packed, b, c),
            _ => avx2(shape, packed, b, c),
        }
    }
}

/// [`run_transposed`] on the family `L`.
///
/// # Safety
/// As [`run_transposed`], `L`'s instructions available.
#[inline(always)]
unsafe fn transposed_panels<L: Tiles>(
    (rows, k, n): (usize, usize, usize),
    packed: *const f32,
    b: *const f32,
    c: *mut f32,
) {
    TILED_ROWS.with(|tiled| {
        let mut tiled = tiled.borrow_mut();
        let mr = rows_per_tile::<L>(n);
        // SAFETY: `b` holds k x n values, per the caller.
        let b_rows = unsafe { std::slice::from_raw_parts(b, k * n) };
        tile_columns(b_rows, (k, n), mr, &mut tiled);
        let b_transposed = Rows::Tiled {
            at: tiled.as_ptr(),
            depth: k,
            mr,
            strided: (b, [1, n as isize]),
        };
        PANEL_OF_CT.with(|ct| {
            let mut ct = ct.borrow_mut();
            if ct.len() < n * NR {
                ct.resize(n * NR);
            }
            for q in 0..rows.div_ceil(NR) {
                let cols = NR.min(rows - q * NR);
                let ct = &mut ct[..n * cols];
                // SAFETY: as the caller promises: the tiles hold B^T's
                // values, B^T is B's values with strides [1, n], and panel
                // q of the pack holds A^T's rows q 32..q 32 + cols; `ct`
                // holds n x cols values.
                unsafe {
                    product::<L>(
                        (n, k, cols),
                        1.0,
                        b_transposed,
                        Source::Packed(packed.add(q * k * NR), k, std::ptr::null()),
                        0.0,
                        (ct.as_mut_ptr(), cols as isize),
                        None,
                    );
                    let c = std::slice::from_raw_parts_mut(c.add(q * NR * n), cols * n);
                    super::transpose(ct, [n, cols], c);
                }
            }
        });
    });
}

/// Copies the columns of the row-major `k x n` matrix `b` (the rows of
/// `B^T`) into tiles of `mr`: tile `t` holds columns `t mr..t mr + mr`
/// as `k` runs of `mr` values, run `p` from row `p` (past the last
/// column, the last column again), the layout [`Rows::Tiled`] reads.
fn tile_columns(b: &[f32], (k, n): (usize, usize), mr: usize, tiled: &mut Vec<f32>) {
    let tiles = n.div_ceil(mr);
    if tiled.len() < tiles * k * mr {
        tiled.resize(tiles * k * mr, 0.0);
    }
    // Each run a copy of a length known at compile time, which the
    // compiler moves in registers: of a run-time length, each of
    // SqueezeNet's conv10's 11,264 runs called memcpy (6% of the layer).
    match mr {
        4 => tile_columns_of::<4>(b, (k, n), tiled),
        5 => tile_columns_of::<5>(b, (k, n), tiled),
        6 => tile_columns_of::<6>(b, (k, n), tiled),
        8 => tile_columns_of::<8>(b, (k, n), tiled),
        10 => tile_columns_of::<10>(b, (k, n), tiled),
        12 => tile_columns_of::<12>(b, (k, n), tiled),
        _ => unreachable!("a tile's height is one of the families' TILE_ROWS, not {mr}"),
    }
}

/// [`tile_columns`] for tiles of `MR` columns, one tile after another,
/// so that the copy writes one stream: row by row, each row's runs went
/// to every tile, as many streams, and the copy took 7% of
/// MobileNet-SSD's conv14_1 (256 x 100 x 1024 as its transpose, AVX-512,
/// tiles of 10). One Zen 4 core (2026-12-06, medians of 5-7 alternating
/// runs, ms): alone 0.498 -> 0.477 (AVX2, tiles of 6, level); in the
/// net conv14_1 0.546 -> 0.529, conv13_mbox_conf 0.288 -> 0.269.
fn tile_columns_of<const MR: usize>(b: &[f32], (k, n): (usize, usize), tiled: &mut [f32]) {
    let whole_tiles = n / MR;
    for (t, runs) in tiled.chunks_exact_mut(k * MR).take(whole_tiles).enumerate() {
        for (p, run) in runs.chunks_exact_mut(MR).enumerate() {
            let from: &[f32; MR] = b[p * n + t * MR..][..MR].try_into().expect("a run of MR");
            let run: &mut [f32; MR] = run.try_into().expect("a run of MR");
            *run = *from;
        }
    }
    if whole_tiles * MR < n {
        let runs = &mut tiled[whole_tiles * k * MR..][..k * MR];
        for (row, run) in b.chunks_exact(n).take(k).zip(runs.chunks_exact_mut(MR)) {
            let rest = &row[whole_tiles * MR..];
            run[..rest.len()].copy_from_slice(rest);
            run[rest.len()..].fill(row[n - 1]);
        }
    }
}

/// `C = A B` for a row-major `m x k` A and the `k x n` B packed in
/// panels of `NR` columns at `panels` (`blas::pack_panels`), into C's
/// first `n` columns (rows `ldc` apart), the tiles asking for the pack
/// at `then` (null where none); says whether it ran (`false` on the
/// baseline, where nothing is read or written). Shallow products (as
/// [`suits`](super::shallow_panels::suits) says) take
/// [`shallow_panels`](super::shallow_panels)' plain tiles.
///
/// # Safety
/// A's `m x k` values are readable; `panels` holds `n.div_ceil(NR)`
/// panels of `k` rows; C's `m x n` values are written by no one else
/// meanwhile and alias neither.
pub(crate) unsafe fn run_panels(
    (m, k, n): (usize, usize, usize),
    a: *const f32,
    (panels, then): (*const f32, *const f32),
    (c, ldc): (*mut f32, isize),
) -> bool {
    if super::shallow_panels::suits(m, k) {
        // SAFETY: as the caller promises.
        return unsafe { super::shallow_panels::run((m, k, n), a, (panels, then), (c, ldc)) };
    }
    // SAFETY: as the caller promises; panel j / NR of the pack holds
    // `k` rows of NR values; a prefetch of `then` reads nothing.
    unsafe {
        product_here(
            (m, k, n),
            1.0,
            (a, [k as isize, 1]),
            Source::Packed(panels, k, then),
            0.0,
            (c, ldc),
            None,
        )
    }
}

/// [`product`] on the family [`isa`] chose; says whether it ran
/// (`false` on the baseline, where nothing is read or written).
///
/// # Safety
/// As [`run_if_suited`], for a matrix B.
unsafe fn product_here(
    shape: (usize, usize, usize),
    alpha: f32,
    a: (*const f32, [isize; 2]),
    b: Source<'_>,
    beta: f32,
    c: (*mut f32, isize),
    finish: Option<Finish>,
) -> bool {
    // SAFETY: as the caller promises; each family runs only where `isa`
    // chose it.
    unsafe {
        match isa() {
            Isa::Avx512 => {
                product::<Avx512>(shape, alpha, Rows::Strided(a.0, a.1), b, beta, c, finish)
            }
            Isa::Avx2 => product::<Avx2>(shape, alpha, Rows::Strided(a.0, a.1), b, beta, c, finish),
            Isa::Baseline => return false,
        }
    }
    true
}

/// [`Lanes::transpose_columns`] on the family [`isa`] chose; says
/// whether it ran (`false` on the baseline, where nothing is written).
///
/// # Safety
/// As [`Lanes::transpose_columns`].
pub(super) unsafe fn transpose_columns_here(
    panel: &mut [f32],
    column: impl Fn(usize) -> *const f32,
    kc: usize,
    cols: usize,
) -> bool {
    // SAFETY: as the caller promises; each family runs only where `isa`
    // chose it.
    unsafe {
        match isa() {
            Isa::Avx512 => Avx512::transpose_columns(panel, column, kc, cols),
            Isa::Avx2 => Avx2::transpose_columns(panel, column, kc, cols),
            Isa::Baseline => return false,
        }
    }
    true
}

/// The product behind every entry: depth blocks of [`depth_block`], B a
/// panel of `NR` columns at a time, tiles of C down each panel; a B read
/// in place or packed a chunk at a time ([`Access`]) is read a chunk of
/// panels at a time for one tile's rows of C after another
/// ([`CHUNK_BYTES`]), and a B packed whole ([`whole_b_suits`]) by one
/// group of C's rows after another ([`row_groups`]).
///
/// # Safety
/// `L`'s instructions are available; as [`run_if_suited`], for a matrix B.
unsafe fn product<L: Tiles>(
    (m, k, n): (usize, usize, usize),
    alpha: f32,
    a: Rows,
    mut b: Source<'_>,
    beta: f32,
    (c, rsc): (*mut f32, isize),
    finish: Option<Finish>,
) {
    PACK.with(|pack| {
        let mut pack = pack.borrow_mut();
        let whole = whole_b_suits((m, k, n), beta, a, &b);
        let block = depth_block(k);
        let mr = rows_per_tile::<L>(m);
        // Whether the tiles of a B read in place ask for the next panel.
        let in_place_ahead =
            k * n >= IN_PLACE_AHEAD_MIN || m <= 2 * mr && k * n >= FEW_TILES_AHEAD_MIN;
        for pc in (0..k).step_by(block) {
            let kc = block.min(k - pc);
            // Later depth blocks add to what the first one wrote; the
            // last one finishes each value as it stores it.
            let beta = if pc == 0 { beta } else { 1.0 };
            let finish = finish.filter(|_| pc + kc == k);
            // SAFETY: column pc of A is inside it (or one past the end
            // with nothing read from there, when k == 0).
            let a = unsafe { a.past_columns(pc) };
            // A B read in place, or packed a chunk at a time, is read a
            // chunk of columns at a time by one tile's rows of C after
            // another (`CHUNK_BYTES`).
            let wide = wide_tiles_suit::<L>(m, beta, a, &b);
            let access = match &b {
                Source::Matrix(..) if whole => Access::PackedChunks,
                Source::Matrix(_, sb) => matrix_access::<L>((m, k, n), *sb, wide),
                _ => Access::PackedPanels,
            };
            let chunk = match access {
                Access::InPlace | Access::PackedChunks if whole => n,
                Access::InPlace | Access::PackedChunks => {
                    chunk_columns::<L>(m, kc, access).unwrap_or(n)
                }
                Access::PackedPanels => n,
            }
            .max(1);
            let group = if chunk < n { mr } else { m.max(1) };
            for jb in (0..n).step_by(chunk) {
                let columns = jb..n.min(jb + chunk);
                if let (Access::PackedChunks, Source::Matrix(b, sb)) = (access, &b) {
                    // SAFETY: rows pc..pc + kc of B's columns `columns`
                    // are inside B, per the caller.
                    unsafe {
                        pack_chunk::<L>(
                            &mut pack,
                            b.offset(pc as isize * sb[0] + jb as isize * sb[1]),
                            *sb,
                            kc,
                            columns.len(),
                        )
                    };
                }
                // Pairs of whole panels in wide tiles first (and the
                // rest where it suits them too); the rest of the columns
                // (fewer than two panels) as before.
                let wide_end = match columns.start + columns.len() / (2 * NR) * (2 * NR) {
                    _ if !wide => columns.start,
                    pairs_end if rest_suits_wide_bands(columns.end - pairs_end, a) => columns.end,
                    pairs_end => pairs_end,
                };
                // With B whole, a group of C's rows passes its wide
                // pairs and then the rest of the columns before the next
                // group's: its rows of A are read from memory once.
                let groups = if whole && wide_end > columns.start && wide_end < columns.end {
                    row_groups(m, mr)
                } else {
                    RowGroups { m, size: m.max(1) }
                };
                let narrow = wide_end..columns.end;
                for rows in groups.iter() {
                    // SAFETY: as the caller promises; the pack holds this
                    // chunk where B is packed in chunks.
                    unsafe {
                        wide_panels::<L>(
                            (rows.clone(), m, pc, kc, a),
                            (&mut b, access, &mut pack),
                            (jb, columns.start..wide_end),
                            alpha,
                            (c, rsc),
                            finish,
                        )
                    };
                    let columns = narrow.clone();
                    let bands = if group < m {
                        Bands::of::<L>(rows.clone(), group, a)
                    } else {
                        Bands::one(rows.clone())
                    };
                    for (ib, height) in bands {
                        // A packed chunk's whole panels after the first
                        // (which asks for the next band's rows of A) in
                        // one call: at 32 deep a tile is 384
                        // multiply-adds, and choosing and setting up
                        // each one (`panel_tiles`, its bands and reads
                        // ahead) took a fifth of the kernel's time. One
                        // Zen 3 core, AVX2, 2026-12-04, medians of 6
                        // alternating runs in the net on a noisy day:
                        // MobileNet-SSD's conv1 (64 x 22,500 x 32) 2.41
                        // -> 2.07 ms, conv2 (128 x 5,625 x 64) 1.93 ->
                        // 1.77; two threads 1.42 -> 1.07 and 1.38 ->
                        // 1.23, the pass 28.6 -> 25.4; ResNet-50's 256 x
                        // 3,136 x 64 layers 1-7% faster.
                        // A B read in place goes the same way where no
                        // tile asks for the next panel: SqueezeNet's
                        // fire2/expand1x1 (64 x 3,025 x 16) 0.260 ->
                        // 0.202 ms, fire3's 0.246 -> 0.197.
                        let whole_end = columns.start + columns.len() / NR * NR;
                        let strip = match (&b, access) {
                            (Source::Matrix(..), Access::PackedChunks) => true,
                            (Source::Matrix(..), Access::InPlace) => !in_place_ahead,
                            _ => false,
                        } && height <= mr;
                        let strip = if strip {
                            (columns.start + NR).min(whole_end)..whole_end
                        } else {
                            0..0
                        };
                        for j in columns.clone().step_by(NR) {
                            if strip.contains(&j) {
                                if j == strip.start {
                                    // Panels side by side in the pack, or
                                    // NR columns apart in B.
                                    let (panel, rsb, step) = match &b {
                                        Source::Matrix(b, sb) if access == Access::InPlace => {
                                            // SAFETY: row pc, column j of B are inside it.
                                            (
                                                unsafe { b.offset(pc as isize * sb[0]).add(j) },
                                                sb[0],
                                                NR,
                                            )
                                        }
                                        // SAFETY: the chunk's panel (j - jb) / NR is
                                        // inside the pack.
                                        _ => (
                                            unsafe { pack.as_ptr().add((j - jb) / NR * kc * NR) },
                                            NR as isize,
                                            kc * NR,
                                        ),
                                    };
                                    // SAFETY: as the caller promises; B's
                                    // panels from `strip.start` on are
                                    // whole, in the pack where it holds
                                    // this chunk.
                                    unsafe {
                                        strip_tiles::<L>(
                                            (ib, height, rows.end, mr),
                                            (kc, a),
                                            (panel, rsb, step, strip.len() / NR),
                                            (alpha, beta),
                                            (c.add(j), rsc),
                                            finish.map(|f| f.past(0, j)),
                                        )
                                    };
                                }
                                continue;
                            }
                            let cols = NR.min(n - j);
                            let ((panel, rsb), in_place) = match &mut b {
                                // SAFETY: the chunk's panel (j - jb) / NR is
                                // inside the pack.
                                Source::Matrix(..) if access == Access::PackedChunks => (
                                    (
                                        unsafe { pack.as_ptr().add((j - jb) / NR * kc * NR) },
                                        NR as isize,
                                    ),
                                    false,
                                ),
                                Source::Matrix(b, sb) => {
                                    // SAFETY: row pc of B is inside it, per the caller.
                                    let b = unsafe { b.offset(pc as isize * sb[0]) };
                                    // A B with adjacent columns is read in place; a
                                    // transposed one is packed so the kernel's loads
                                    // are adjacent. A panel is packed just before its
                                    // tiles use it (with the few after it), so it is
                                    // still in L2.
                                    if access == Access::PackedPanels {
                                        let at_once = panels_packed_at_once(kc);
                                        let index = (j - columns.start) / NR;
                                        if index.is_multiple_of(at_once) {
                                            // SAFETY: the kc x cols block at row 0, column
                                            // j of `b` is inside B, per the caller.
                                            unsafe {
                                                pack_chunk::<L>(
                                                    &mut pack,
                                                    b.offset(j as isize * sb[1]),
                                                    *sb,
                                                    kc,
                                                    (at_once * NR).min(columns.end - j),
                                                )
                                            };
                                        }
                                        // SAFETY: the pack holds this panel.
                                        (
                                            (
                                                unsafe {
                                                    pack.as_ptr().add(index % at_once * kc * NR)
                                                },
                                                NR as isize,
                                            ),
                                            false,
                                        )
                                    } else {
                                        // SAFETY: column j is inside B's rows.
                                        ((unsafe { b.add(j) }, sb[0]), true)
                                    }
                                }
                                // SAFETY: panel j / NR of the pack holds `depth`
                                // rows, of which rows pc..pc + kc are inside it.
                                Source::Packed(packed, depth, _) => (
                                    (
                                        unsafe { packed.add((j / NR * *depth + pc) * NR) },
                                        NR as isize,
                                    ),
                                    false,
                                ),
                                Source::Filled(fill) => {
                                    if pack.len() < kc * NR {
                                        pack.resize(kc * NR);
                                    }
                                    fill(pc..pc + kc, j..j + cols, &mut pack[..kc * NR]);
                                    ((pack.as_ptr(), NR as isize), false)
                                }
                            };
                            // A pack made beforehand lives beyond the caches (a net's
                            // weights, read once a pass): the first tile of each panel
                            // asks for the rows the product reads next as it reads its
                            // own, so two streams are in flight (one alone ran
                            // ResNet-50's 1x1 layers at 7 x 7 0.71x-0.75x slower in
                            // the net than alone). Those are the next panel's rows of
                            // this depth block, or after the last panel the first
                            // panel's next block, or after the last block the pack
                            // the caller multiplies next (Winograd's next point).
                            // Asked for the same panel's next block, read only after
                            // every other panel's, darknet19's Winograd products (1024
                            // -> 1024 at 13 x 13, 1024 deep over 32 panels) took 39 ms
                            // a layer on one core, against 21 so. Past the pack's
                            // end, the requests fetch nothing.
                            // A wide B read in place (a 1x1 convolution's image over
                            // few channels: MobileNet's 32 x 22,500) has each row of
                            // a panel in its own page; its next panel's rows are
                            // asked for the same way.
                            let next_panel = match &b {
                                Source::Packed(packed, depth, then) => {
                                    if j + NR < n {
                                        Ahead::packed(
                                            packed.wrapping_add(((j / NR + 1) * *depth + pc) * NR),
                                        )
                                    } else if pc + kc < *depth || then.is_null() {
                                        Ahead::packed(packed.wrapping_add((pc + kc) * NR))
                                    } else {
                                        Ahead::packed(*then)
                                    }
                                }
                                Source::Matrix(..) if in_place && j + NR < n && in_place_ahead => {
                                    Ahead {
                                        at: panel.wrapping_add(NR),
                                        row_stride: rsb,
                                        rows: usize::MAX,
                                        runs: 1,
                                        every: 1,
                                        three_lines: true,
                                    }
                                }
                                _ => Ahead::NONE,
                            };
                            // SAFETY: as the caller promises; the panel is
                            // rows pc..pc + kc of B's columns j..j + cols.
                            unsafe {
                                panel_tiles::<L>(
                                    (ib..rows.end.min(ib + height), mr),
                                    (kc, a),
                                    (panel, rsb, cols),
                                    (next_panel, j == jb),
                                    (alpha, beta),
                                    (c.add(j), rsc),
                                    finish.map(|f| f.past(0, j)),
                                )
                            };
                        }
                    }
                }
            }
        }
    });
}

/// The fewest rows of C [`wide_panels`] takes: every count from 20 on
/// is a sum of 5s and 6s.
const WIDE_MIN_ROWS: usize = 20;

/// Whether [`product`] runs a depth block's pairs of whole panels in
/// [`Tiles::wide_tile`]s: on a family that has them, for a C of at least
/// [`WIDE_MIN_ROWS`] rows written afresh (`beta` 0: a convolution's
/// product, and the first depth block of a deeper one; the general
/// stores, which read C, keep to two registers a row), A read through
/// its strides (B^T tiled at the two-register heights is not) and B a
/// matrix or filled (a pack made beforehand keeps its read-ahead).
fn wide_tiles_suit<L: Tiles>(m: usize, beta: f32, a: Rows, b: &Source<'_>) -> bool {
    !L::WIDE_ROWS.is_empty()
        && m >= WIDE_MIN_ROWS
        && beta == 0.0
        && matches!(a, Rows::Strided(..))
        && !matches!(b, Source::Packed(..))
}

/// Whether C's last `rest` columns after its pairs of panels (1-63) run
/// in [`wide_panels`]' bands of 5 and 6 rows too, in tiles of as many
/// registers as they fill, rather than in two-register tiles of up to 12
/// rows and one-register tiles of up to 24: where A's rows, read in
/// place, lie a multiple of 4 KB apart (1024 or 2048 deep), every row's
/// line of a step falls in the same set of L1, which holds 8 (12 on
/// Intel's 48 KB), and the taller tiles read A from L2. One Zen 4 core,
/// AVX-512, 2026-12-06, the layer alone, the choice switched at run
/// time, medians of 5 alternating runs, ms: 1024 -> 75 at 10 x 10
/// (MobileNet-YOLOv3 lite's conv19, 36 columns left) 0.209 -> 0.172,
/// at 20 x 20 (conv20, 16 left) 0.651 -> 0.621, at 14 x 14 0.345 ->
/// 0.318, at 12 x 12 0.257 -> 0.225, at 11 x 11 0.206 -> 0.196. With A's
/// rows 2 KB apart (512 deep: MobileNet-SSD's conv11_mbox_conf, 512 ->
/// 63 at 19 x 19; SqueezeNet's conv10) level, and shallower products
/// (SqueezeNet's 1x1 layers, 16-128 deep) slower by 3-20%.
fn rest_suits_wide_bands(rest: usize, a: Rows) -> bool {
    const SET_BYTES: isize = 4096;
    let crowded =
        matches!(a, Rows::Strided(_, sa) if sa[1] == 1 && sa[0] * 4 % SET_BYTES == 0 && sa[0] > 0);
    crowded && rest > 0 && rest < 2 * NR
}

/// The most bytes of B that [`product`] packs whole, for one pass of
/// C's bands of rows over all of it (half of L2).
const WHOLE_B_BYTES: usize = 1 << 20;

/// The deepest product [`product`] takes in one depth block.
const ONE_BLOCK_DEPTH: usize = 1024;

/// The depth of [`product`]'s blocks for a product `k` deep: the whole
/// depth up to [`ONE_BLOCK_DEPTH`], [`KC`] past it. Past [`KC`], a second
/// block ran in the narrower tiles that read C again (ResNet-50's 1024
/// -> 256 layers). The depth alone decides, as it is the one side no
/// caller cuts into pieces: every family, every form of B or A and
/// every count of cores sums the same blocks.
fn depth_block(k: usize) -> usize {
    if k <= ONE_BLOCK_DEPTH { k.max(1) } else { KC }
}

/// Whether [`product`] packs all of B at once: for a C written afresh
/// (`beta` 0) of more than [`FEW_ROWS`] rows and more than two panels'
/// columns, A read through its strides, and a matrix B with adjacent
/// columns, at least 128 deep (one that would be packed a panel at a
/// time), in one depth block ([`depth_block`]) that fits
/// [`WHOLE_B_BYTES`] (a 1x1 layer at 14 x 14 or 28 x 28). On a family
/// with wide tiles, each band of C's rows then passes over all of B
/// before the next ([`wide_panels`]). Panel by panel, every pair of
/// panels read all of A (a net's weights, 1 MB for ResNet-50's 256 ->
/// 1024 layers) from beyond L2 again.
///
/// With the one depth block and the wide tiles' read-ahead of A, one
/// Intel core (2026-12-03, `cpu::gemm_finished` with a shortcut and
/// ReLU, 48 weights cycled so that A comes from beyond L2 as in a net,
/// best of 5): AVX-512 1024 x 196 x 256 0.70-0.75 -> 0.57 ms, 256 x 196
/// x 1024 0.62 -> 0.57, 512 x 196 x 1024 1.35 -> 1.13, 256 x 784 x 128
/// 0.30 -> 0.28; AVX2 1024 x 196 x 256 1.03 -> 0.99, 512 x 196 x 1024
/// 2.15 -> 2.06. In the nets, medians of 4-6 alternating runs of two
/// builds, one thread: ResNet-50 43.0 -> 41.4 ms (its 256 -> 1024 layers
/// with their shortcut 0.73-0.78 -> 0.62-0.65), GoogLeNet (10 images)
/// 164 -> 155, SqueezeNet (10) 48.0 -> 46.5, MobileNet-SSD 15.5 -> 15.2,
/// CaffeNet (10) 85.5 -> 84.2; on AVX2 ResNet-50 74.5 -> 73.1,
/// SqueezeNet 70.4 -> 68.8, MobileNet-SSD 26.5 -> 26.0, GoogLeNet level;
/// two threads ResNet-50 26.9 -> 26.2, GoogLeNet 90.8 -> 88.0.
fn whole_b_suits((m, k, n): (usize, usize, usize), beta: f32, a: Rows, b: &Source<'_>) -> bool {
    beta == 0.0
        && m > FEW_ROWS
        && n > 2 * NR
        && k >= 128
        && depth_block(k) == k
        && k * n * std::mem::size_of::<f32>() <= WHOLE_B_BYTES
        && matches!(a, Rows::Strided(..))
        && matches!(b, Source::Matrix(_, sb) if sb[1] == 1)
}

/// Groups of C's `m` rows, `size` at a time, the last taking the rest.
#[derive(Clone, Copy)]
struct RowGroups {
    m: usize,
    size: usize,
}

impl RowGroups {
    fn iter(self) -> impl Iterator<Item = Range<usize>> {
        let RowGroups { m, size } = self;
        let count = (m / size).max(1);
        (0..count).map(move |g| g * size..if g + 1 == count { m } else { (g + 1) * size })
    }
}

/// The groups of rows in which [`product`] passes a whole B: bands of
/// wide tiles (6 rows) and tiles of `mr` rows end together at each
/// group's end, a group's rows of A (96-120 of them) stay in L2 from its
/// wide tiles to its narrow ones, and the last group, which takes the
/// rest, has at least [`WIDE_MIN_ROWS`].
fn row_groups(m: usize, mr: usize) -> RowGroups {
    let both = mr * 6 / gcd(mr, 6);
    let size = 96usize.div_ceil(both) * both;
    if m < size + WIDE_MIN_ROWS {
        return RowGroups { m, size: m.max(1) };
    }
    RowGroups { m, size }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Bands of C's `m` rows (at least [`WIDE_MIN_ROWS`]) for wide tiles,
/// as `(first row, rows)`: as few of 5 rows as leave the rest in 6s.
fn wide_bands(m: usize) -> impl Iterator<Item = (usize, usize)> + Clone {
    let fives = (0..6)
        .find(|f| {
            m.checked_sub(5 * f)
                .is_some_and(|rest| rest.is_multiple_of(6))
        })
        .unwrap_or(0);
    let heights = std::iter::repeat_n(5, fives).chain(std::iter::repeat_n(6, (m - 5 * fives) / 6));
    heights.scan(0, |first, rows| {
        let band = (*first, rows);
        *first += rows;
        Some(band)
    })
}

/// C's `columns` (whole pairs of panels, from column `jb` of the chunk,
/// and where [`rest_suits_wide_bands`] the last 1-63 after them, in a
/// tile of as many registers as they fill) of a depth block `pc..pc +
/// kc`, for C's `rows` (of `m`), in wide tiles (AVX-512: 5 or 6 rows of
/// four registers, 64 columns, against two panels side by side):
/// per step 20 or 24 multiply-adds for 9 or 10 loads, where the
/// two-register tile of 8 rows has 16 for 10 (12 rows: 24 for 14).
/// Read in place or packed in chunks, B's chunk is passed by one band of
/// rows after another; packed a panel at a time or filled, two panels
/// are made at a time and every band passes over them. The sums are
/// the same chain of multiply-adds, so the same bits. One Intel core
/// (AVX-512, 2026-12-02, the same build with and without, 2 alternating
/// rounds, `cpu::gemm_finished`, warm): 64 x 22,500 x 32 (MobileNet's
/// conv1) 0.88-0.90 -> 0.80-0.83 ms, 128 x 5,625 x 128 1.29-1.33 ->
/// 1.21-1.23, 256 x 3,136 x 64 0.74-0.76 -> 0.66-0.68, 512 x 361 x 512
/// 1.22-1.27 -> 1.10-1.11. In the nets, two builds, medians of 4-5
/// alternating runs (a busier hour): MobileNet-SSD 20.8 -> 20.0 ms (its
/// conv1 1.06 -> 0.98, conv9 1.30 -> 1.15; at two threads 12.9 ->
/// 12.5), ResNet-50 61.7 -> 61.1, SqueezeNet (10 images) 66.7 -> 65.2,
/// GoogLeNet (10 images) 236 -> 218.
///
/// # Safety
/// `L`'s instructions are available; as [`product`]'s caller promises,
/// for the block; a pack in chunks holds this chunk's panels.
#[inline(always)]
unsafe fn wide_panels<L: Tiles>(
    (rows, m, pc, kc, a): (Range<usize>, usize, usize, usize, Rows),
    (b, access, pack): (&mut Source<'_>, Access, &mut AlignedVec<f32>),
    (jb, columns): (usize, Range<usize>),
    alpha: f32,
    (c, rsc): (*mut f32, isize),
    finish: Option<Finish>,
) {
    if columns.is_empty() {
        return;
    }
    let bands = wide_bands(rows.len()).map(move |(i, height)| (rows.start + i, height));
    let gap_packed = (kc * NR) as isize;
    let first_pair = columns.start;
    let end = columns.end;
    let tile = |band: (usize, usize), j: usize, b: (*const f32, isize, isize)| {
        // SAFETY: the band's rows of A, C's columns from j (64, or the
        // last 33-48) and the two panels at `b` are inside them, per the
        // caller.
        unsafe {
            wide_tile_at::<L>(
                (m, kc, a, j == first_pair),
                band,
                (j, (2 * NR).min(end - j), b),
                alpha,
                (c, rsc),
                finish,
            )
        }
    };
    let pairs = columns.step_by(2 * NR);
    match (b, access) {
        (Source::Matrix(b, sb), Access::InPlace | Access::PackedChunks) => {
            for band in bands {
                for j in pairs.clone() {
                    let panels = if access == Access::PackedChunks {
                        // SAFETY: the chunk's panel (j - jb) / NR is inside the pack.
                        (
                            unsafe { pack.as_ptr().add((j - jb) / NR * kc * NR) },
                            NR as isize,
                            gap_packed,
                        )
                    } else {
                        // SAFETY: row pc, column j of B is inside it.
                        (
                            unsafe { b.offset(pc as isize * sb[0]).add(j) },
                            sb[0],
                            NR as isize,
                        )
                    };
                    tile(band, j, panels);
                }
            }
        }
        (Source::Matrix(b, sb), Access::PackedPanels) => {
            for j in pairs {
                // SAFETY: the block's kc x 64 values from row pc, column
                // j are inside B.
                unsafe {
                    pack_chunk::<L>(
                        pack,
                        b.offset(pc as isize * sb[0] + j as isize * sb[1]),
                        *sb,
                        kc,
                        (2 * NR).min(end - j),
                    )
                };
                for band in bands.clone() {
                    tile(band, j, (pack.as_ptr(), NR as isize, gap_packed));
                }
            }
        }
        (Source::Filled(fill), _) => {
            for j in pairs {
                if pack.len() < 2 * kc * NR {
                    pack.resize(2 * kc * NR);
                }
                let (first, second) = pack[..2 * kc * NR].split_at_mut(kc * NR);
                fill(pc..pc + kc, j..end.min(j + NR), first);
                if end > j + NR {
                    fill(pc..pc + kc, j + NR..end.min(j + 2 * NR), second);
                }
                for band in bands.clone() {
                    tile(band, j, (pack.as_ptr(), NR as isize, gap_packed));
                }
            }
        }
        (Source::Packed(..), _) => unreachable!("a pack made beforehand takes no wide tiles"),
    }
}

/// [`wide_panels`]' tile of the band `(i, rows)` at C's column `j`, `cols`
/// columns (64, or the last 1-63), against the two panels `b`; on the `first_pair` (where the band reads
/// its rows of A for the first time), it asks for the next band's rows
/// as it runs (a net's weights lie beyond the caches, and the tiles
/// waited for them). A function of its own, always inlined: as a
/// closure, it was called and reloaded what it captured from the stack.
///
/// # Safety
/// As [`wide_panels`]: `L`'s instructions are available, and the
/// band's rows of A, C's `cols` columns from `j` and the panels at `b` are
/// inside them.
#[inline(always)]
unsafe fn wide_tile_at<L: Tiles>(
    (m, kc, a, first_pair): (usize, usize, Rows, bool),
    (i, rows): (usize, usize),
    (j, cols, b): (usize, usize, (*const f32, isize, isize)),
    alpha: f32,
    (c, rsc): (*mut f32, isize),
    finish: Option<Finish>,
) {
    // SAFETY: as the caller promises.
    unsafe {
        let (a, sa) = a.tile(i, false);
        let next = i + rows;
        let ahead = if first_pair && next < m && sa[1] == 1 {
            Ahead {
                at: a.offset(rows as isize * sa[0]),
                row_stride: sa[0],
                rows: (m - next).min(*L::WIDE_ROWS.last().unwrap_or(&1)),
                runs: kc.div_ceil(NR),
                every: 1,
                three_lines: false,
            }
        } else {
            Ahead::NONE
        };
        let tile = Tile {
            rows,
            cols,
            alpha,
            beta: 0.0,
            c: c.offset(i as isize * rsc + j as isize),
            rsc,
            ahead,
            finish: finish.map(|f| f.past(i, j)),
        };
        L::wide_tile(rows, (kc, a, sa, b), &tile);
    }
}

/// Tile `t`'s share of the packed `next_panel`'s `kc` runs (`share` a
/// tile): runs `t share..` of it, one every `kc / share` steps of the
/// tile's depth, so that the panel is asked for at the pace its tiles
/// use the one before. Asked for by the panel's first tile alone, a run
/// every step, the requests came faster than memory answers (128 KiB in
/// that tile's 10,000 cycles for MobileNet-SSD's conv13) and held up
/// the tile's own loads behind them. In the net, one Intel core
/// (2026-12-03, the same build with and without, medians of 4-5
/// alternating runs, ms, AVX-512): MobileNet-SSD's conv13 (1024 x 100 x
/// 1024 from packed weights) 1.96 -> 1.68, conv12 (1024 x 100 x 512)
/// 1.05 -> 0.95, the pass 23.3 -> 22.6; ResNet-50's last stage
/// (products of 49 pixels) 15-25% a layer, the pass 64.3 -> 59.1; on
/// AVX2, conv13 2.79 -> 2.54, conv12 1.51 -> 1.39, conv14_2 1.34 -> 1.20.
fn spread_ahead(next_panel: Ahead, kc: usize, (t, share): (usize, usize)) -> Ahead {
    if t * share >= kc {
        return Ahead::NONE;
    }
    Ahead {
        at: next_panel.at.wrapping_add(t * share * NR),
        row_stride: 0,
        rows: 1,
        runs: share.min(kc - t * share),
        every: (kc / share).max(1),
        three_lines: false,
    }
}

/// The tiles of C's rows `rows` (of `m`) over one panel of B: `cols`
/// columns of `kc` rows `rsb` apart at `panel`, into C's columns from
/// `c`; the tiles ask for `next_panel` (where there is one), a packed
/// one each its share ([`spread_ahead`]), another the first tile. A
/// narrow tile taller than `rows` computes rows past them and writes
/// none of them (only C's last panel has one).
///
/// On the `first_panel` of a depth block, where the tiles read their
/// rows of A for the first time, each other tile asks for the next
/// tile's rows of A (read in place, row by row): a net's weights lie
/// beyond the caches, and the tiles waited for them. One Intel core
/// (AVX-512, 2026-12-02, the same build with and without): a chain of
/// 1x1 layers 256 -> 1024 at 14 x 14, 48 MB of weights, 0.78-0.79 ->
/// 0.72 ms a layer (1024 -> 256 level); ResNet-50 55.8 -> 54.1 ms (AVX2
/// 82.6 -> 78.0), YOLOv3 355 -> 341; MobileNet-SSD, GoogLeNet,
/// SqueezeNet, darknet19 and CaffeNet level.
///
/// # Safety
/// `L`'s instructions are available; rows `rows` and `kc` columns of A
/// (strides `sa`), the panel's `kc x cols` values and those rows and
/// columns of C are inside their allocations, C's written by no one
/// else.
#[inline(always)]
unsafe fn panel_tiles<L: Tiles>(
    (rows, mr): (Range<usize>, usize),
    (kc, a): (usize, Rows),
    (panel, rsb, cols): (*const f32, isize, usize),
    (next_panel, first_panel): (Ahead, bool),
    (alpha, beta): (f32, f32),
    (c, rsc): (*mut f32, isize),
    finish: Option<Finish>,
) {
    // A tile is two registers wide: the panel's 32 columns in one on
    // AVX-512, in two side by side on AVX2. Where the last tile of a
    // panel fits one register (C's last columns: 9 of SqueezeNet's 169),
    // it is one register wide and twice as high, rather than half empty,
    // on a family whose loads keep up with such tiles
    // (`Tiles::NARROW_TILES`).
    let width = 2 * L::N;
    let narrow = match cols % width {
        0 => cols,
        rest if rest <= L::N && L::NARROW_TILES => cols - rest,
        _ => cols,
    };
    let (first, end) = (rows.start, rows.end);
    // A packed next panel is asked for by every tile of this one, each
    // its share of the runs, one run every few steps (`spread_ahead`);
    // on a first panel whose tiles ask for the next tile's rows of A,
    // the first tile asks for all of it.
    let a_in_rows = matches!(a, Rows::Strided(_, sa) if sa[1] == 1);
    let spread = next_panel.row_stride == 0 && !next_panel.is_none() && !(first_panel && a_in_rows);
    let bands = Bands::of::<L>(first..end, mr, a);
    let count = if spread {
        let two_wide = bands.clone().count() * narrow.div_ceil(width);
        let one_wide = if narrow < cols {
            rows.len().div_ceil(2 * mr)
        } else {
            0
        };
        (two_wide + one_wide).max(1)
    } else {
        1
    };
    let share = kc.div_ceil(count);
    let at = TileAt {
        mr,
        rows: first..end,
        kc,
        a,
        panel: (panel, rsb, cols),
        next_panel,
        first_panel,
        spread: spread.then_some(share),
        ab: (alpha, beta),
        c: (c, rsc),
        finish,
    };
    // The tiles as plain loops, their height chosen once by the caller:
    // a tile of a shallow product does a few hundred multiply-adds, and
    // the iterator of tiles (its divisions, the height chosen again a
    // panel) took 16% of MobileNet's conv1 on AVX2 (64 x 22,500 x 32).
    // With the bands of 5 and 6 rows (`Bands`), one Zen 3 core, AVX2,
    // 2026-12-04, medians of 8 alternating runs in the net: conv1 1.69
    // -> 1.58 ms, conv2 1.38 -> 1.30, conv3 2.85 -> 2.73, the 512-deep
    // layers at 19 x 19 2-2.5% faster, the pass 34.6 -> 33.8 (two
    // threads 19.7 -> 19.4); SqueezeNet 12.3 -> 12.0 (two threads 6.88
    // -> 6.37); ResNet-50 and GoogLeNet level.
    let mut t = 0;
    for (i, height) in bands {
        let mut j0 = 0;
        while j0 < narrow {
            // SAFETY: as the caller promises.
            unsafe { at.run::<L>(t, (i, j0), (height, false)) };
            t += 1;
            j0 += width;
        }
    }
    if narrow < cols {
        let mut i = first;
        while i < end {
            // SAFETY: as the caller promises.
            unsafe { at.run::<L>(t, (i, narrow), (mr, true)) };
            t += 1;
            i += 2 * mr;
        }
    }
}

/// [`panel_tiles`] for the band of C's rows from `first`, `height` high
/// (at most `mr`; rows from `end` on are not C's), across `panels` whole
/// panels of B from `panel`, each `kc` rows `rsb` apart, `step` values
/// after the one before, C from column 0 at `c`: no tile reads ahead.
///
/// # Safety
/// As [`panel_tiles`], for each panel.
#[inline(always)]
unsafe fn strip_tiles<L: Tiles>(
    (first, height, end, mr): (usize, usize, usize, usize),
    (kc, a): (usize, Rows),
    (panel, rsb, step, panels): (*const f32, isize, usize, usize),
    (alpha, beta): (f32, f32),
    (c, rsc): (*mut f32, isize),
    finish: Option<Finish>,
) {
    // SAFETY: as the caller promises.
    unsafe {
        // As `TileAt::run`: the kernel's height is the band's, and a last
        // band that C's rows end inside stores only those rows.
        let (a, sa) = a.tile(first, height == mr);
        let tile = Tile {
            rows: height.min(end - first),
            cols: 2 * L::N,
            alpha,
            beta,
            c: c.offset(first as isize * rsc),
            rsc,
            ahead: Ahead::NONE,
            finish: finish.map(|f| f.past(first, 0)),
        };
        L::strip(height, (kc, a, sa), (panel, rsb, step, panels), &tile);
    }
}

/// [`panel_tiles`]' arguments, read by each of its tiles.
struct TileAt {
    mr: usize,
    rows: Range<usize>,
    kc: usize,
    a: Rows,
    panel: (*const f32, isize, usize),
    next_panel: Ahead,
    first_panel: bool,
    /// Each tile's share of a packed next panel's runs, where the tiles
    /// spread them.
    spread: Option<usize>,
    ab: (f32, f32),
    c: (*mut f32, isize),
    finish: Option<Finish>,
}

impl TileAt {
    /// The `t`-th tile from row `i`, column `j0`: `height` rows two
    /// registers wide, or `2 height` one register wide where `narrow`.
    ///
    /// # Safety
    /// As [`panel_tiles`]; the tile starts inside the panel's rows and
    /// columns.
    #[inline(always)]
    unsafe fn run<L: Tiles>(
        &self,
        t: usize,
        (i, j0): (usize, usize),
        (height, narrow): (usize, bool),
    ) {
        let (end, kc) = (self.rows.end, self.kc);
        let (panel, rsb, cols) = self.panel;
        let (c, rsc) = self.c;
        // SAFETY: rows i..i+rows and columns 0..kc of A, the panel's
        // columns j0..cols and that tile of C are inside them, per the
        // caller, who found `L`'s instructions.
        unsafe {
            let (a, sa) = self.a.tile(i, !narrow && height == self.mr);
            let c = c.offset(i as isize * rsc + j0 as isize);
            let ahead = if let Some(share) = self.spread {
                spread_ahead(self.next_panel, kc, (t, share))
            } else if i == self.rows.start && j0 == 0 && !self.next_panel.is_none() {
                self.next_panel
            } else if self.first_panel && j0 == 0 && !narrow && i + 2 * height <= end && sa[1] == 1
            {
                Ahead {
                    at: a.offset(height as isize * sa[0]),
                    row_stride: sa[0],
                    rows: height,
                    runs: kc.div_ceil(NR),
                    every: 1,
                    three_lines: false,
                }
            } else {
                Ahead::NONE
            };
            let rows = if narrow { 2 * height } else { height };
            let tile = Tile {
                rows: rows.min(end - i),
                cols: (cols - j0).min(2 * L::N),
                alpha: self.ab.0,
                beta: self.ab.1,
                c,
                rsc,
                ahead,
                finish: self.finish.map(|f| f.past(i, j0)),
            };
            let ahead = !ahead.is_none();
            L::tile(
                (height, narrow, ahead),
                (kc, a, sa, panel.add(j0), rsb),
                &tile,
            );
        }
    }
}

/// The bands of C's rows that tiles of one height after another take,
/// as `(first row, height)`: on AVX2, a strided A's rows in tiles of
/// `mr - 1` and `mr` rows where some mix of the two fills every tile
/// (MobileNet's 64 channels as two of 5 and nine of 6, where tiles of 6
/// left the last one a third empty and on the masked stores' path);
/// otherwise tiles of `mr`, the last one partly past the rows.
#[derive(Clone)]
struct Bands {
    at: usize,
    end: usize,
    /// How many of the first bands are one row short of `mr`.
    short: usize,
    mr: usize,
}

impl Bands {
    fn of<L: Lanes>(rows: Range<usize>, mr: usize, a: Rows) -> Bands {
        let len = rows.len();
        let mixes = L::ISA == Isa::Avx2 && matches!(a, Rows::Strided(..)) && mr > L::TILE_ROWS[0];
        let short = if mixes && len <= mr {
            // One tile's rows (a band [`product`] passed): no division.
            usize::from(len == mr - 1)
        } else if mixes {
            (0..mr)
                .find(|&f| {
                    len.checked_sub((mr - 1) * f)
                        .is_some_and(|rest| rest.is_multiple_of(mr))
                })
                .unwrap_or(0)
        } else {
            0
        };
        Bands {
            at: rows.start,
            end: rows.end,
            short,
            mr: mr.max(1),
        }
    }

    /// All of `rows` as one band.
    fn one(rows: Range<usize>) -> Bands {
        Bands {
            at: rows.start,
            end: rows.end,
            short: 0,
            mr: rows.len().max(1),
        }
    }
}

impl Iterator for Bands {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        if self.at >= self.end {
            return None;
        }
        let height = if self.short > 0 {
            self.short -= 1;
            self.mr - 1
        } else {
            self.mr
        };
        let band = (self.at, height);
        self.at += height;
        Some(band)
    }
}

/// How [`product`] reads a matrix B.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Where it lies, a chunk of columns at a time ([`chunk_columns`]).
    InPlace,
    /// Packed a chunk of columns at a time, each chunk's panels side by
    /// side, before one tile's rows of C after another pass over it.
    PackedChunks,
    /// Packed a panel at a time, just before all of C's rows pass over
    /// it.
    PackedPanels,
}

/// How [`product`] reads a matrix B with strides `sb`: in place where
/// its columns are adjacent and the product shallow, narrow or short (a
/// deep, wide B read in place would thrash L1, its rows a panel's width
/// apart in pages of their own), or of at most [`FEW_ROWS`] rows of C;
/// of those, a C of at least [`PACKED_CHUNKS_MIN_C`] values and more
/// rows packs its chunks, unless its pairs of panels run in `wide` tiles;
/// the rest, its panels.
fn matrix_access<L: Lanes>((m, k, n): (usize, usize, usize), sb: [isize; 2], wide: bool) -> Access {
    let in_place =
        sb[1] == 1 && (m <= FEW_ROWS || !(m > L::TILE_ROWS[0] && n > 2 * NR && k >= 128));
    if !in_place {
        Access::PackedPanels
    } else if m > FEW_ROWS && m * n >= PACKED_CHUNKS_MIN_C && !wide {
        Access::PackedChunks
    } else {
        Access::InPlace
    }
}

/// The most rows of C for which [`product`] reads even a deep, wide B in
/// place: a packed panel served too few tiles to pay for its copy. So
/// read, SqueezeNet's eight squeeze layers (four of 16-32 rows, over
/// 128-256 channels) took 0.94-0.97 -> 0.84-0.85 ms on AVX-512 and
/// 1.11-1.14 -> 0.99-1.02 on AVX2, its batch-10 pass 79-81 -> 78-79 / 87
/// -> 85-87 ms, GoogLeNet's 5x5_reduce layers (16-32 rows; 48 stay packed)
/// 0.73-0.74 -> 0.67 / 0.88-0.92 -> 0.83-0.85 (one Zen 4 core, batch 1,
/// all layers of each kind in the net, 2026-12-01); at 64 rows,
/// SqueezeNet's fire9 ran level.
const FEW_ROWS: usize = 32;

/// The fewest values of C (2 MiB, beyond L2) for which a shallow B that
/// would be read in place is packed a chunk at a time instead: read in
/// place, its rows lie a row of the image apart, each in its own page,
/// while C's stores stream past L2. Chains of three 1x1 layers on one
/// Zen 4 core (2026-12-01, the fastest of 7 alternating runs, ms a
/// layer, AVX-512 / AVX2): 64 -> 256 at 56 x 56 1.19 -> 1.07 / 1.19 ->
/// 1.16, 32 -> 64 at 150 x 150 (MobileNet's conv1) 1.30 -> 1.19 / 1.57 ->
/// 1.43, 64 -> 64 at 112 x 112 1.30 -> 1.23 / 1.40 -> 1.38; at 2^18
/// values of C and fewer packing lost 2-7% (64 -> 64 at 56 x 56 0.261 ->
/// 0.278 / 0.299 -> 0.314), and at 401,408 values it gained 2-3% over 64
/// channels (64 -> 128 at 56 x 56) and lost 2% over 32 (32 -> 128).
///
/// AVX-512's wide tiles (four registers a row against two panels) read
/// such a B in place faster than packed: its copy, a tenth of MobileNet's
/// conv1, is gone, and the tiles' loads of its rows keep up. One Zen 5
/// core (2026-12-05, in the nets, medians of 6-8 alternating runs of
/// one build, the choice switched at run time): MobileNet-SSD's conv1
/// (64 x 22,500 x 32) 0.550-0.577 -> 0.508-0.536 ms, conv2 (128 x 5,625
/// x 64) 0.450-0.456 -> 0.430-0.442 (the pass within the day's noise of
/// 2-4%); two threads conv1 0.422 -> 0.376; MobileNet-YOLOv3-lite's
/// conv1 0.650 -> 0.615, conv2 0.487 -> 0.469; ResNet-50's res2 256 x
/// 3,136 x 64 layers 2-5%. On AVX2, whose narrow tiles take the same B,
/// in place ran 24% slower.
const PACKED_CHUNKS_MIN_C: usize = 1 << 19;

/// The bytes of B that a tile's rows of C read before the next tile's,
/// read in place or packed: a chunk that stays in L2 while C's rows pass
/// over it. Panel by panel for all of C's rows, C's tiles are written a
/// panel's width at a time into as many pages as C has rows, and
/// MobileNet-SSD's conv1 (64 x 22,500 x 32, B from memory) took 2.1-2.3
/// ms in the net on a Zen 4 core; a chunk of 128 KiB at a time for two
/// tiles' rows (16 on AVX-512), 1.6-2.3 ms; for one tile's (8 rows, C
/// written as 8 runs of 4 KiB), 1.53-1.61 ms on AVX-512, 1.78-1.92 on
/// AVX2 (two tiles' 1.97- 2.04). Chunks of 64 to 256 KiB ran within 0.05
/// ms of it.
const CHUNK_BYTES: usize = 128 << 10;

/// How many panels of depth `kc` [`product`] packs at a time where it
/// packs B a panel at a time ([`CHUNK_BYTES`] of them): each row of B is
/// then read a run of several panels at once, rather than two cache
/// lines of as many pages a panel (`perf` put the packing at 28% of
/// MobileNet-SSD's conv3, 128 x 5,625 x 128). One Zen 3 core, AVX2,
/// 2026-12-04: best of 300 runs, medians of 6 alternations, 128 x 5,625
/// x 128 3.22 -> 2.85 ms, 256 x 1,444 x 128 1.33 -> 1.29; in the net
/// (medians of 6 alternating runs) conv3 4.95 -> 3.88 ms, conv4 2.15 ->
/// 2.04, conv5 (512 x 361 x 256, two panels at a time) 3.92 -> 3.58, the
/// 512-deep layers level; two threads conv3 2.69 -> 2.38, conv4 1.36 ->
/// 1.25; GoogLeNet's pass 57.0 -> 52.3 (4 runs, a noisy day).
fn panels_packed_at_once(kc: usize) -> usize {
    (CHUNK_BYTES / (kc.max(1) * NR * std::mem::size_of::<f32>())).max(1)
}

/// The columns of B of depth `kc` that [`product`] takes at a time for
/// an `m`-row C read through `access`, or `None` where every row of C
/// passes over each panel before the next: where C's rows fill one
/// tile, and on AVX2 where B is read in place for at most [`FEW_ROWS`]
/// rows.
///
/// Those few rows are two to eight of AVX2's tiles high, and a chunk
/// at a time each band of them read the chunk's panels again from L2,
/// a row of B a row of the image apart and across two cache lines; a
/// panel at a time, the bands after the first read it from L1 while the
/// next one is asked for. One Zen 3 core (AVX2, 2026-12-06, medians of
/// 5-6 alternating runs of one build, the choice switched at run time):
/// 16 x 3,025 x 128 (SqueezeNet's fire3/squeeze1x1) alone 0.336 -> 0.246
/// ms, 16 x 3,025 x 96 0.34 -> 0.24; in the net fire3/squeeze1x1 0.38 ->
/// 0.23-0.29; GoogLeNet's eight 5x5_reduce layers of 16-32 rows
/// (192-832 deep) 1.03 -> 0.90 together, its 48-row one 4% faster and a
/// 64-row layer beside them 6% (the day's noise). For 64 rows
/// (SqueezeNet's 64 x 3,025 x 16 layers) it ran 14% slower: C's stores
/// then go to too many rows at once.
fn chunk_columns<L: Lanes>(m: usize, kc: usize, access: Access) -> Option<usize> {
    let few_rows_in_place = L::ISA == Isa::Avx2 && access == Access::InPlace && m <= FEW_ROWS;
    if m <= rows_per_tile::<L>(m) || few_rows_in_place {
        return None;
    }
    let columns = CHUNK_BYTES / (kc.max(1) * std::mem::size_of::<f32>());
    Some((columns / NR).max(1) * NR)
}

/// How many panels [`pack_chunk`] fills row by row before the next
/// ones. A row of B goes to every panel's same row, `kc * NR` values
/// apart: 4 KiB at 32 deep, so all of a chunk's stores of one row fell
/// in the same two sets of L1 and evicted each other (32 panels, 64
/// lines, in 8-12 ways) before the row was done. Four panels' lines fit
/// the ways. MobileNet-SSD's conv1 (64 x 22,500 x 32) alone, medians of
/// 5 alternating runs, one Zen 5 core (2026-12-04): 0.518 -> 0.489 ms on
/// AVX-512, 0.858 -> 0.830 on AVX2 (eight panels: 0.486, 0.830); in the
/// net, conv1 -1%, conv4 (256 x 1,444 x 128) -4%, the pass level.
const PANELS_PACKED_BY_ROWS: usize = 4;

/// Packs the `kc x cols` block of B at `b` (strides `sb`) as its panels
/// side by side, each `kc` rows of `NR` values, zero past `cols`: row by
/// row where B's columns are adjacent, otherwise a panel at a time
/// ([`pack_panel`]).
///
/// # Safety
/// `L`'s instructions are available; every element of the `kc x cols`
/// block at `b` with strides `sb` is readable.
unsafe fn pack_chunk<L: Lanes>(
    pack: &mut AlignedVec<f32>,
    b: *const f32,
    sb: [isize; 2],
    kc: usize,
    cols: usize,
) {
    let panels = cols.div_ceil(NR);
    if pack.len() < panels * kc * NR {
        pack.resize(panels * kc * NR);
    }
    if sb[1] == 1 {
        // Row by row, each row's run of the chunk read once, front to
        // back: panel by panel, each of a panel's rows was a page of its
        // own (an image row apart), and the packing of MobileNet's
        // 128 -> 128 layer at 75 x 75 took a fifth of its time. A few
        // panels at a time ([`PANELS_PACKED_BY_ROWS`]), all rows of them
        // before the next few.
        let pack = &mut pack[..panels * kc * NR];
        // SAFETY: the caller found `L`'s instructions.
        let here = unsafe { Available::<L>::new() };
        here.run(
            #[inline(always)]
            || {
                for first in (0..panels).step_by(PANELS_PACKED_BY_ROWS) {
                    let columns = first * NR..cols.min((first + PANELS_PACKED_BY_ROWS) * NR);
                    for p in 0..kc {
                        // SAFETY: row p's `columns` (within 0..cols) are
                        // inside the block.
                        let src = unsafe {
                            std::slice::from_raw_parts(
                                b.offset(p as isize * sb[0]).add(columns.start),
                                columns.len(),
                            )
                        };
                        for (q, run) in (first..).zip(src.chunks(NR)) {
                            let row = &mut pack[(q * kc + p) * NR..][..NR];
                            if run.len() == NR {
                                // A whole row in the family's registers:
                                // compiled without them, the copy moved
                                // 16 bytes at a time.
                                for h in (0..NR).step_by(L::N) {
                                    // SAFETY: lanes h..h + N of both rows
                                    // are inside them.
                                    unsafe {
                                        L::store(
                                            row.as_mut_ptr().add(h),
                                            L::load(run.as_ptr().add(h)),
                                        )
                                    };
                                }
                            } else {
                                row[..run.len()].copy_from_slice(run);
                                row[run.len()..].fill(0.0);
                            }
                        }
                    }
                }
            },
        );
        return;
    }
    for (q, panel) in pack.chunks_exact_mut(kc * NR).take(panels).enumerate() {
        // SAFETY: the panel's columns are inside the block, per the caller.
        unsafe {
            pack_panel::<L>(
                panel,
                b.offset((q * NR) as isize * sb[1]),
                sb,
                kc,
                NR.min(cols - q * NR),
            )
        };
    }
}

/// Packs the `kc x cols` block of B at `b` (`cols` at most `NR`), whose
/// columns are not adjacent, into `panel`: `kc` rows of `NR` values,
/// zero past `cols`.
///
/// # Safety
/// `L`'s instructions are available; every element of the `kc x cols`
/// block at `b` with strides `sb` is readable.
unsafe fn pack_panel<L: Lanes>(
    panel: &mut [f32],
    b: *const f32,
    sb: [isize; 2],
    kc: usize,
    cols: usize,
) {
    if sb[0] == 1 {
        // A transposed B (a gemm's `Transpose::Yes`): each column is a
        // run of adjacent values, moved a square block at a time through
        // registers (gathers read 16 cache lines for 16 values).
        // SAFETY: columns 0..cols, rows 0..kc of the block are inside it
        // and the masks keep the others unread; the caller found `L`.
        unsafe { L::transpose_columns(panel, |j| b.offset(j as isize * sb[1]), kc, cols) };
    } else {
        panel.fill(0.0);
        for j in 0..cols {
            // SAFETY: column j is inside the block.
            let src = unsafe { b.offset(j as isize * sb[1]) };
            for p in 0..kc {
                // SAFETY: row p of that column is inside the block.
                panel[p * NR + j] = unsafe { *src.offset(p as isize * sb[0]) };
            }
        }
    }
}

/// Where one kernel call writes: `rows x cols` of C at `c`.
struct Tile {
    rows: usize,
    cols: usize,
    alpha: f32,
    beta: f32,
    c: *mut f32,
    rsc: isize,
    /// What to fetch into L2 as the tile runs (with the kernel's
    /// `AHEAD`), or [`Ahead::NONE`].
    ahead: Ahead,
    /// What each stored value of the tile's rows becomes, or `None`
    /// where the product is not done with them yet (or has no finish).
    finish: Option<Finish>,
}

/// Values a tile asks for as it runs, a run of `NR` (two cache lines)
/// every `every` steps: the `r`-th run is row `r % rows` of the block at
/// `at` (rows `row_stride` apart), from column `r / rows * NR`, for the
/// first `rows * runs` runs. A packed panel of B is one long row (a
/// share of it a tile: [`spread_ahead`]); a panel of B read in place,
/// rows `rsb` apart, a run of each; the next tile's rows of A, their
/// depth block's runs of each row in turn.
#[derive(Clone, Copy)]
struct Ahead {
    at: *const f32,
    row_stride: isize,
    rows: usize,
    runs: usize,
    /// Steps of the depth from one run asked for to the next: 1, or
    /// more to spread the requests over the tile.
    every: usize,
    /// Whether each run is asked for as three lines rather than two: a
    /// panel of B read in place, whose rows start anywhere in a line
    /// (`rsb` values apart), spans three lines where its first value is
    /// not a line's first, and the third, the next panel's first line,
    /// was asked for by no one. MobileNet-SSD's conv11_mbox_loc (12 x
    /// 361 x 512, its feature map written a dozen layers before), one
    /// Zen 4 core (2026-12-05, medians of 5-8 alternating runs, ms):
    /// behind a 47 MB inner product 0.117-0.132 -> 0.062-0.065, in the
    /// net 0.084 -> 0.058 (ONNX Runtime's 0.058), on AVX2 (two tiles a
    /// panel) level. Runs of a row read in turn (A's rows, where a third
    /// line a run made ResNet-50's 1x1 layers 1-2% slower) and packed
    /// runs start on a line, and ask for two.
    three_lines: bool,
}

impl Ahead {
    const NONE: Ahead = Ahead {
        at: std::ptr::null(),
        row_stride: 0,
        rows: 1,
        runs: 0,
        every: 1,
        three_lines: false,
    };

    /// A pack's next `NR`-value rows, one after another.
    fn packed(at: *const f32) -> Ahead {
        Ahead {
            at,
            row_stride: 0,
            rows: 1,
            runs: usize::MAX,
            every: 1,
            three_lines: false,
        }
    }

    fn is_none(&self) -> bool {
        self.at.is_null()
    }
}

/// A product's [`RowFinish`] as the kernel reads it: the bias of C's
/// first row at `bias`, the next row's after it; the shortcut of C's
/// first value at `shortcut` (null where there is none), laid out as C.
#[derive(Clone, Copy)]
pub(crate) struct Finish {
    bias: *const f32,
    shortcut: *const f32,
    /// How far apart the shortcut's rows lie.
    shortcut_stride: isize,
    /// [`Shortcut::first`](super::Shortcut::first).
    shortcut_first: bool,
    rectifier: Rectifier,
}

impl Finish {
    /// `finish` for the block of a product from row `row`, column
    /// `column` of its C, whose rows lie `ldc` apart.
    ///
    /// # Safety
    /// `finish.bias` holds row `row`'s bias and every later row's; the
    /// shortcut, where there is one, holds C's values from there on.
    pub(crate) unsafe fn of(
        finish: &RowFinish<'_>,
        (row, column, ldc): (usize, usize, usize),
    ) -> Finish {
        let (shortcut, shortcut_first) = match finish.shortcut {
            // SAFETY: as the caller promises.
            Some(s) => (
                unsafe { s.values.as_ptr().add(row * ldc + column) },
                s.first,
            ),
            None => (std::ptr::null(), false),
        };
        Finish {
            // SAFETY: as the caller promises.
            bias: unsafe { finish.bias.as_ptr().add(row) },
            shortcut,
            shortcut_stride: ldc as isize,
            shortcut_first,
            rectifier: finish.rectifier,
        }
    }

    /// The same finish for a C that starts at row `row`, column `column`.
    fn past(self, row: usize, column: usize) -> Finish {
        Finish {
            bias: self.bias.wrapping_add(row),
            shortcut: if self.shortcut.is_null() {
                self.shortcut
            } else {
                self.shortcut
                    .wrapping_offset(row as isize * self.shortcut_stride + column as isize)
            },
            ..self
        }
    }

    /// `v`, a register of row `row`'s values from column `column`, plus
    /// its bias and its shortcut (the columns `mask` keeps), rectified
    /// ([`finished`]). The shortcut `ahead` rows on (the next tile's, in
    /// the same columns) is asked for meanwhile: read from memory as the
    /// tile is stored, the shortcut cost more than the Eltwise pass it
    /// replaces; asked for before the tile's products, its pointers stayed
    /// in registers through them, and AVX2's 6-row tiles ran 12% slower
    /// even with no shortcut (SqueezeNet's conv10).
    ///
    /// # Safety
    /// `L`'s instructions are enabled; row `row` has a bias, and the
    /// shortcut's values `mask` keeps there are readable.
    #[inline(always)]
    unsafe fn apply<L: Lanes>(
        self,
        (row, column, mask): (usize, usize, L::M),
        ahead: usize,
        v: L::V,
    ) -> L::V {
        // SAFETY: as the caller promises.
        unsafe {
            let bias = L::splat(*self.bias.add(row));
            if self.shortcut.is_null() {
                return finished::<L>(v, bias, self.rectifier);
            }
            let at = self
                .shortcut
                .wrapping_offset(row as isize * self.shortcut_stride + column as isize);
            shortcut_finished::<L>(
                (v, bias),
                (L::load_masked(mask, at), self.shortcut_first),
                at.wrapping_offset(ahead as isize * self.shortcut_stride),
                self.rectifier,
            )
        }
    }
}

/// `v` plus its `bias` and the shortcut `s` in Caffe's Eltwise order (the
/// shortcut the sum's first bottom where `first`), rectified; the
/// shortcut at `next` (the next tile's) asked for meanwhile. The one
/// finish of a shortcut, for [`Finish::apply`] and [`whole_stores`].
///
/// # Safety
/// `L`'s instructions are enabled.
#[inline(always)]
unsafe fn shortcut_finished<L: Lanes>(
    (v, bias): (L::V, L::V),
    (s, first): (L::V, bool),
    next: *const f32,
    rectifier: Rectifier,
) -> L::V {
    // SAFETY: as the caller promises; a prefetch reads nothing.
    unsafe {
        _mm_prefetch::<_MM_HINT_T0>(next as *const i8);
        let v = L::add(v, bias);
        // Caffe's SUM: a zero fill, then an axpy a bottom.
        let sum = if first {
            L::add(L::add(L::zero(), s), v)
        } else {
            L::add(L::add(L::zero(), v), s)
        };
        rectified::<L>(sum, rectifier)
    }
}

/// A family's tile kernels, each compiled for it: the heights of
/// [`Lanes::TILE_ROWS`] with and without reading ahead, and [`dots`].
trait Tiles: Lanes {
    /// [`kernel`] with `mr` rows (one of `TILE_ROWS`) two registers
    /// wide, or `2 mr` one register wide where `narrow`, reading ahead
    /// when `ahead`, for the tile `(kc, a, sa, b, rsb)` of A and B.
    ///
    /// # Safety
    /// As [`kernel`]; a narrow tile has at most `N` columns.
    unsafe fn tile(
        shape: (usize, bool, bool),
        ab: (usize, *const f32, [isize; 2], *const f32, isize),
        tile: &Tile,
    );

    /// The heights of [`Tiles::wide_tile`], none where the family has no
    /// wide tile (AVX2's 16 registers hold no tile of four a row).
    const WIDE_ROWS: &'static [usize];

    /// Whether a panel's last columns that fit one register run in
    /// tiles one register wide and twice as high ([`panel_tiles`]),
    /// rather than two registers wide and mostly empty. Such a tile
    /// broadcasts a value of A for each multiply-add, and AVX2's
    /// multiply-adds, two a cycle, outran the loads: on one Zen 4 core
    /// (2026-12-06, one build, the choice switched at run time, medians
    /// of 6-8 alternating runs) MobileNet-SSD's 10 x 10 layers on AVX2
    /// ran faster without them (conv14_1, 256 x 100 x 1024, 0.718 ->
    /// 0.676 ms; conv13_mbox_loc 0.140 -> 0.124, conv13_mbox_conf 0.336
    /// -> 0.313; conv13 level), as did 512 x 49 x 2048 alone (1.38 ->
    /// 1.17) and ResNet-50 within its noise (73.1 -> 72.3 ms); on
    /// AVX-512 one a cycle keeps them fed, and without them 256 x 169 x
    /// 512 ran 0.430 -> 0.469.
    const NARROW_TILES: bool;

    /// [`kernel`] with `rows` rows (one of `WIDE_ROWS`) four registers
    /// wide over two panels, or as many as a last tile's columns fill,
    /// `b = (first panel, row stride, gap)` with the second `gap` values
    /// past the first.
    ///
    /// # Safety
    /// As [`kernel`]; the tile has every row, with beta 0, and at most
    /// `4 N` columns; `rows` is one of `WIDE_ROWS`.
    unsafe fn wide_tile(
        rows: usize,
        _ab: (usize, *const f32, [isize; 2], (*const f32, isize, isize)),
        _tile: &Tile,
    ) {
        unreachable!("no wide tile of {rows} rows")
    }

    /// [`kernel`] with `rows` rows (one of `TILE_ROWS`) two registers
    /// wide, without reading ahead, over `panels` whole panels of B
    /// (`NR` columns, rows `rsb` apart), each `step` values after the one
    /// before: every tile of one band of C's rows in one call, `tile` the
    /// first, the others `2 N` columns after each other.
    ///
    /// # Safety
    /// As [`kernel`], for each tile.
    unsafe fn strip(
        rows: usize,
        a: (usize, *const f32, [isize; 2]),
        b: (*const f32, isize, usize, usize),
        tile: &Tile,
    );

    /// [`dots`] in this family's tile of dots; returns `true`.
    ///
    /// # Safety
    /// The CPU has this family's instructions; as [`dots`].
    unsafe fn dots(args: DotsArgs) -> bool;
}

/// [`dots`]' arguments: the shape, alpha, A's rows, B's columns, beta
/// and C, each with its stride.
type DotsArgs = (
    (usize, usize, usize),
    f32,
    (*const f32, isize),
    (*const f32, isize),
    f32,
    (*mut f32, isize),
);

/// Implements [`Tiles`] for a family: `$features` enabled in each
/// kernel's copy, `$rows` its three heights, `$dot` its tile of dots,
/// `narrow` its [`Tiles::NARROW_TILES`], `wide` its wide tiles' heights.
macro_rules! tiles {
    ($lanes:ty, $features:literal, [$r0:literal, $r1:literal, $r2:literal], $dot:literal, narrow $narrow:literal $(, wide [$($w:literal),+])?) => {
        impl Tiles for $lanes {
            const WIDE_ROWS: &'static [usize] = &[$($($w),+)?];
            const NARROW_TILES: bool = $narrow;
            $(
            #[inline]
            unsafe fn wide_tile(
                rows: usize,
                (kc, a, sa, b): (usize, *const f32, [isize; 2], (*const f32, isize, isize)),
                tile: &Tile,
            ) {
                #[target_feature(enable = $features)]
                unsafe fn run<const ROWS: usize, const WIDE: usize, const AHEAD: bool>(
                    (kc, a, sa, b): (usize, *const f32, [isize; 2], (*const f32, isize, isize)),
                    tile: &Tile,
                ) {
                    // SAFETY: the caller's, and the features are enabled.
                    unsafe { kernel::<$lanes, ROWS, WIDE, AHEAD>(kc, a, sa, b, tile) }
                }
                let ab = (kc, a, sa, b);
                let registers = tile.cols.div_ceil(<$lanes as Lanes>::N);
                // SAFETY: the caller's.
                unsafe {
                    match (rows, registers, tile.ahead.is_none()) {
                        $(($w, 4, true) => run::<$w, 4, false>(ab, tile),
                          ($w, 4, false) => run::<$w, 4, true>(ab, tile),
                          ($w, 3, true) => run::<$w, 3, false>(ab, tile),
                          ($w, 3, false) => run::<$w, 3, true>(ab, tile),
                          ($w, 2, true) => run::<$w, 2, false>(ab, tile),
                          ($w, 2, false) => run::<$w, 2, true>(ab, tile),
                          ($w, _, true) => run::<$w, 1, false>(ab, tile),
                          ($w, _, false) => run::<$w, 1, true>(ab, tile),)+
                        _ => unreachable!("no wide tile of {rows} rows"),
                    }
                }
            }
            )?

            #[inline]
            unsafe fn tile(
                (mr, narrow, ahead): (usize, bool, bool),
                (kc, a, sa, b, rsb): (usize, *const f32, [isize; 2], *const f32, isize),
                tile: &Tile,
            ) {
                #[target_feature(enable = $features)]
                unsafe fn run<const ROWS: usize, const WIDE: usize, const AHEAD: bool>(
                    (kc, a, sa, b, rsb): (usize, *const f32, [isize; 2], *const f32, isize),
                    tile: &Tile,
                ) {
                    // SAFETY: the caller's, and the features are enabled.
                    unsafe { kernel::<$lanes, ROWS, WIDE, AHEAD>(kc, a, sa, (b, rsb, NR as isize), tile) }
                }
                let ab = (kc, a, sa, b, rsb);
                // SAFETY: the caller's.
                unsafe {
                    match (mr, narrow, ahead) {
                        ($r1, false, false) => run::<$r1, 2, false>(ab, tile),
                        ($r2, false, false) => run::<$r2, 2, false>(ab, tile),
                        (_, false, false) => run::<$r0, 2, false>(ab, tile),
                        ($r1, false, true) => run::<$r1, 2, true>(ab, tile),
                        ($r2, false, true) => run::<$r2, 2, true>(ab, tile),
                        (_, false, true) => run::<$r0, 2, true>(ab, tile),
                        // A family without narrow tiles is never asked
                        // for one, and its copies of them are dropped.
                        (_, true, _) if !$narrow => {
                            unreachable!("{} runs no narrow tiles", <$lanes as Lanes>::ISA)
                        }
                        ($r1, true, false) => run::<{ 2 * $r1 }, 1, false>(ab, tile),
                        ($r2, true, false) => run::<{ 2 * $r2 }, 1, false>(ab, tile),
                        (_, true, false) => run::<{ 2 * $r0 }, 1, false>(ab, tile),
                        ($r1, true, true) => run::<{ 2 * $r1 }, 1, true>(ab, tile),
                        ($r2, true, true) => run::<{ 2 * $r2 }, 1, true>(ab, tile),
                        (_, true, true) => run::<{ 2 * $r0 }, 1, true>(ab, tile),
                    }
                }
            }

            #[inline]
            unsafe fn strip(
                rows: usize,
                a: (usize, *const f32, [isize; 2]),
                b: (*const f32, isize, usize, usize),
                tile: &Tile,
            ) {
                #[target_feature(enable = $features)]
                unsafe fn run<const ROWS: usize>(
                    (kc, a, sa): (usize, *const f32, [isize; 2]),
                    (b, rsb, step, panels): (*const f32, isize, usize, usize),
                    tile: &Tile,
                ) {
                    let width = 2 * <$lanes as Lanes>::N;
                    for q in 0..panels {
                        for h in (0..NR).step_by(width) {
                            let column = q * NR + h;
                            let at = Tile {
                                c: tile.c.wrapping_add(column),
                                finish: tile.finish.map(|f| f.past(0, column)),
                                ..*tile
                            };
                            // SAFETY: the caller's, and the features are
                            // enabled; panel q lies q steps past the first.
                            unsafe {
                                kernel::<$lanes, ROWS, 2, false>(
                                    kc,
                                    a,
                                    sa,
                                    (b.add(q * step + h), rsb, NR as isize),
                                    &at,
                                )
                            }
                        }
                    }
                }
                debug_assert!(rows <= $r2, "a strip of {rows} rows");
                // The shortest kernel at least as tall as the band: a band
                // of all of C's rows can be of any height up to the
                // tallest tile (9 or 11 rows on AVX-512), and the kernel
                // computes the rows past it without storing them.
                // SAFETY: the caller's.
                unsafe {
                    match rows {
                        r if r <= $r0 => run::<$r0>(a, b, tile),
                        r if r <= $r1 => run::<$r1>(a, b, tile),
                        _ => run::<$r2>(a, b, tile),
                    }
                }
            }

            unsafe fn dots((shape, alpha, a, b, beta, c): DotsArgs) -> bool {
                #[target_feature(enable = $features)]
                unsafe fn run((shape, alpha, a, b, beta, c): DotsArgs) {
                    // SAFETY: the caller's, and the features are enabled.
                    unsafe { dots::<$lanes, $dot>(shape, alpha, a, b, beta, c) }
                }
                // SAFETY: the caller's.
                unsafe { run((shape, alpha, a, b, beta, c)) };
                true
            }
        }
    };
}

tiles!(Avx512, "avx512f", [8, 10, 12], 4, narrow true, wide [5, 6]);
tiles!(Avx2, "avx2,fma", [4, 5, 6], 3, narrow false);

/// `C[..rows, ..cols] = alpha * A[..rows, ..kc] * B[..kc, ..cols] + beta * C`
/// for one tile of `WIDE` registers a row (2, or 1 for at most `N`
/// columns; or up to 4, the third and fourth across the next panel `gap`
/// values on, for a tile of every row with beta 0: [`wide_panels`]), A
/// read through its strides (rows past `rows` read the last row again,
/// and are not written), B by rows `rsb` apart; with `AHEAD`, the runs
/// of `tile.ahead` are asked for, one a step (a constant, so the other
/// products carry no test in their loop: one cost SqueezeNet 3%).
///
/// # Safety
/// `L`'s instructions are enabled; the `rows x kc` block of A, the `kc x
/// cols` block of B and the tile of C are inside their allocations, C's
/// tile writable (and readable unless `beta == 0`).
#[inline(always)]
unsafe fn kernel<L: Lanes, const ROWS: usize, const WIDE: usize, const AHEAD: bool>(
    kc: usize,
    a: *const f32,
    sa: [isize; 2],
    (b, rsb, gap): (*const f32, isize, isize),
    tile: &Tile,
) {
    let masks: [L::M; WIDE] = std::array::from_fn(|h| {
        // SAFETY: `L`'s instructions are enabled, per the caller.
        unsafe { L::first(tile.cols.saturating_sub(h * L::N)) }
    });
    let rows: [*const f32; ROWS] =
        // SAFETY: row min(i, rows - 1) is inside A.
        std::array::from_fn(|i| unsafe { a.offset(i.min(tile.rows - 1) as isize * sa[0]) });
    if tile.beta != 0.0 {
        // The tile of C is read after the products: ask for it now, so
        // a C that lives beyond L2 (an inner product's weight gradient,
        // 1.6 MB for LeNet's ip1) is in L1 by then.
        for i in 0..tile.rows {
            let row = tile.c.wrapping_offset(i as isize * tile.rsc);
            for at in (0..tile.cols).step_by(16) {
                // SAFETY: a prefetch reads nothing.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(at) as *const i8) };
            }
        }
    }
    let whole = masks.iter().all(|&m| L::whole(m));
    let ab = (kc, rows, sa[1], (b, rsb, gap));
    // SAFETY: as above.
    let (alpha, beta) = unsafe { (L::splat(tile.alpha), L::splat(tile.beta)) };
    // The whole tile's sums are their own value, apart from the general
    // stores' (which index them by a run-time row and so keep them in
    // memory): computed once for both, every tile wrote its 16 or 24
    // registers to the stack and read them back before its stores.
    if whole && tile.rows == ROWS && tile.beta == 0.0 {
        // SAFETY: a prefetch reads nothing.
        unsafe { ask_for_c_ahead::<L, ROWS, WIDE>(tile.c, tile.rsc) };
        let c = (tile.c, tile.rsc);
        let bias = tile.finish.map_or(std::ptr::null(), |f| f.bias);
        // A convolution's wide tiles (alpha 1, no shortcut) compute and
        // store in one path a finish: with the finishes' stores after one
        // shared product, every tile wrote its 24 sums to the stack first
        // (a tenth of a 32-deep tile's time). One Zen 5 core, medians of
        // 5 alternating runs in the nets, ms: MobileNet-SSD's conv1 (64 x
        // 22,500 x 32) 0.512 -> 0.486, MobileNet-YOLOv3-lite's conv1 and
        // conv2 0.560 -> 0.545 and 0.435 -> 0.423; 128 deep and more
        // level. The narrow tiles so made ran slower on AVX2 (MobileNet-SSD
        // 19.46 -> 19.81 ms) and keep the shared product.
        macro_rules! sole {
            ($finish:ident) => {{
                // SAFETY: as the caller promises; a tile of whole
                // registers needs no mask; the tile's rows and columns
                // are all C's, and a finish holds each row's bias.
                unsafe {
                    let acc = products::<L, ROWS, WIDE, AHEAD, true>(ab, masks, tile.ahead);
                    whole_stores::<L, ROWS, WIDE, $finish, NO_SHORTCUT, false>(
                        &acc,
                        alpha,
                        c,
                        bias,
                        (std::ptr::null(), 0),
                    );
                }
                return;
            }};
        }
        if WIDE == 4 && tile.alpha == 1.0 && tile.finish.is_none_or(|f| f.shortcut.is_null()) {
            match tile.finish.map(|f| f.rectifier) {
                None => sole!(PLAIN),
                Some(Rectifier::None) => sole!(BIASED),
                Some(Rectifier::Relu) => sole!(RELU),
                Some(Rectifier::Relu6) => sole!(RELU6),
            }
        }
        // SAFETY: as the caller promises; a tile of whole registers
        // needs no mask.
        let acc = unsafe { products::<L, ROWS, WIDE, AHEAD, true>(ab, masks, tile.ahead) };
        let (shortcut, kind) = match tile.finish {
            Some(f) if !f.shortcut.is_null() => (
                (f.shortcut, f.shortcut_stride),
                if f.shortcut_first {
                    SHORTCUT_FIRST
                } else {
                    SHORTCUT_SECOND
                },
            ),
            _ => ((std::ptr::null(), 0), NO_SHORTCUT),
        };
        macro_rules! store {
            ($finish:ident, $shortcut:ident) => {
                if tile.alpha == 1.0 {
                    whole_stores::<L, ROWS, WIDE, $finish, $shortcut, false>(
                        &acc, alpha, c, bias, shortcut,
                    )
                } else {
                    whole_stores::<L, ROWS, WIDE, $finish, $shortcut, true>(
                        &acc, alpha, c, bias, shortcut,
                    )
                }
            };
        }
        // SAFETY: the tile's rows and columns are all C's (whole
        // registers, every row); a finish holds each row's bias and, where
        // it has one, the shortcut each value of the tile.
        unsafe {
            match (tile.finish.map(|f| f.rectifier), kind) {
                (None, _) => store!(PLAIN, NO_SHORTCUT),
                (Some(Rectifier::None), NO_SHORTCUT) => store!(BIASED, NO_SHORTCUT),
                (Some(Rectifier::None), SHORTCUT_FIRST) => store!(BIASED, SHORTCUT_FIRST),
                (Some(Rectifier::None), _) => store!(BIASED, SHORTCUT_SECOND),
                (Some(Rectifier::Relu), NO_SHORTCUT) => store!(RELU, NO_SHORTCUT),
                (Some(Rectifier::Relu), SHORTCUT_FIRST) => store!(RELU, SHORTCUT_FIRST),
                (Some(Rectifier::Relu), _) => store!(RELU, SHORTCUT_SECOND),
                (Some(Rectifier::Relu6), NO_SHORTCUT) => store!(RELU6, NO_SHORTCUT),
                (Some(Rectifier::Relu6), SHORTCUT_FIRST) => store!(RELU6, SHORTCUT_FIRST),
                (Some(Rectifier::Relu6), _) => store!(RELU6, SHORTCUT_SECOND),
            }
        }
        return;
    }
    // SAFETY: as the caller promises, and the masks keep B's columns
    // below `cols`; a tile of whole registers needs none.
    let acc = unsafe {
        if whole {
            products::<L, ROWS, WIDE, AHEAD, true>(ab, masks, tile.ahead)
        } else {
            products::<L, ROWS, WIDE, AHEAD, false>(ab, masks, tile.ahead)
        }
    };
    for (i, pair) in acc.iter().take(tile.rows).enumerate() {
        for (half, (&v, &mask)) in pair.iter().zip(&masks).enumerate() {
            if tile.cols <= half * L::N {
                continue;
            }
            // SAFETY: row i < rows, and the mask keeps columns below cols.
            unsafe {
                let dst = tile
                    .c
                    .offset(i as isize * tile.rsc + (L::N * half) as isize);
                let out = if tile.beta == 0.0 {
                    L::mul(alpha, v)
                } else {
                    let old = L::load_masked(mask, dst);
                    L::fmadd(alpha, v, L::mul(beta, old))
                };
                let out = match tile.finish {
                    Some(finish) => finish.apply::<L>((i, L::N * half, mask), ROWS, out),
                    None => out,
                };
                L::store_masked(mask, dst, out);
            }
        }
    }
}

/// How far along its rows, in columns, a whole tile of C written afresh
/// asks for the lines it will write two wide tiles later (four on
/// AVX-512's narrow tiles, eight on AVX2's), to own them when it stores
/// there. A net's large outputs lie beyond the caches when a pass
/// reaches them (the memory a blob shares was last written a pass ago,
/// past 23 MB of weights), and a C of 64 rows written a chunk of
/// columns at a time is 64 streams into as many pages, more than the
/// hardware follows: each tile's stores waited for their lines. In the
/// net, one Intel core (2026-12-03, the same build with and without,
/// medians of 5 alternating runs, ms, AVX-512 / AVX2): MobileNet-SSD's
/// conv1 (64 x 22,500 x 32) 1.15 -> 0.99 / 1.68 -> 1.49, conv2 0.78 ->
/// 0.76 / 1.19 -> 1.15, the whole pass 21.7 -> 21.2 / 30.3 -> 30.2;
/// ResNet-50 58.0 -> 56.1, SqueezeNet 60.7 -> 59.4, GoogLeNet 204 ->
/// 199 (AVX-512). At 64 columns ahead, 256 and 512, level with 128 or
/// slower; `gemm_finished` alone with C in the cache (64 x 22,500 x 32)
/// level, with C cold 1.17 -> 1.03 ms.
const C_AHEAD_COLUMNS: isize = 128;

/// Asks, as writes, for the lines of the `ROWS x WIDE` registers' tile
/// of C [`C_AHEAD_COLUMNS`] columns past the one at `c` (rows `rsc`
/// apart); past C's end, the requests fetch nothing.
///
/// # Safety
/// `L`'s instructions are enabled (a prefetch reads nothing).
#[inline(always)]
pub(crate) unsafe fn ask_for_c_ahead<L: Lanes, const ROWS: usize, const WIDE: usize>(
    c: *mut f32,
    rsc: isize,
) {
    for i in 0..ROWS {
        let row = c.wrapping_offset(i as isize * rsc + C_AHEAD_COLUMNS);
        for at in (0..WIDE * L::N).step_by(16) {
            // SAFETY: a prefetch reads nothing.
            unsafe { _mm_prefetch::<_MM_HINT_ET0>(row.wrapping_add(at) as *const i8) };
        }
    }
}

/// What [`whole_stores`] makes of each sum before it stores it, a
/// constant so that no store of a tile tests for it: `alpha` times the
/// sum, then (but for `PLAIN`) its row's bias added and the rectifier
/// applied.
const PLAIN: u8 = 0;
/// [`PLAIN`]'s, the bias added.
const BIASED: u8 = 1;
/// [`BIASED`]'s, then Caffe's `ReLU`.
const RELU: u8 = 2;
/// [`BIASED`]'s, then `ReLU6`.
const RELU6: u8 = 3;

/// Whether and how [`whole_stores`] adds a shortcut (a residual add
/// folded into the layer) after the bias: none, or in Caffe's Eltwise
/// order with the shortcut as the sum's first or second bottom.
const NO_SHORTCUT: u8 = 0;
/// The shortcut the Eltwise sum's first bottom.
const SHORTCUT_FIRST: u8 = 1;
/// The shortcut the Eltwise sum's second bottom.
const SHORTCUT_SECOND: u8 = 2;

/// Stores a whole tile (every row of `ROWS`, every lane of its `WIDE`
/// registers) of a product with `beta` 0 into C at `c` (rows `rsc`
/// apart), each sum times `alpha` where `SCALED` (an `alpha` of 1, every
/// convolution's, leaves each sum's bits as they are, so its tiles skip
/// the multiplies), then finished as `FINISH` says ([`PLAIN`], [`BIASED`],
/// [`RELU`], [`RELU6`]) with row `i`'s bias at `bias + i`, and the
/// shortcut laid out as C (rows `shortcut_stride` apart) added as
/// `SHORTCUT` says ([`NO_SHORTCUT`], [`SHORTCUT_FIRST`],
/// [`SHORTCUT_SECOND`]): the operations of [`kernel`]'s general stores
/// and [`Finish::apply`], so their bits, with the row count and every
/// choice known at compile time. Through the general loop, whose row
/// count is known only at run time, the sums went through the stack and
/// each store tested beta, the finish and the shortcut. Shallow
/// products, whose tiles are mostly their stores, gain most (one thread,
/// AVX-512, warm, 2026-12-02, two builds alternated 4-6 times): 128 x
/// 729 x 32 0.057-0.060 -> 0.050-0.053 ms, 64 x 3,025 x 16 (SqueezeNet's
/// fire2/expand1x1) 0.089-0.094 -> 0.082, 512 x 361 x 512 1.29-1.35 ->
/// 1.24-1.27 (64 x 2,048 x 32 moved either way between builds). In the
/// nets, medians of 3-4 alternating runs: MobileNet-SSD on AVX2 35.3 ->
/// 33.9 ms (its conv1, 64 x 22,500 x 32, 2.14 -> 1.82), on AVX-512
/// conv1 1.29 -> 1.23; SqueezeNet (10 images) 73.0 -> 71.3; ResNet-50
/// 62.2 -> 61.6.
///
/// # Safety
/// `L`'s instructions are enabled; the `ROWS x WIDE N` values of C at
/// `c` are writable; unless `PLAIN`, `bias` holds `ROWS` values; with a
/// shortcut, it holds the tile's values.
#[inline(always)]
unsafe fn whole_stores<
    L: Lanes,
    const ROWS: usize,
    const WIDE: usize,
    const FINISH: u8,
    const SHORTCUT: u8,
    const SCALED: bool,
>(
    acc: &[[L::V; WIDE]; ROWS],
    alpha: L::V,
    (c, rsc): (*mut f32, isize),
    bias: *const f32,
    (shortcut, shortcut_stride): (*const f32, isize),
) {
    let rectifier = match FINISH {
        RELU => Rectifier::Relu,
        RELU6 => Rectifier::Relu6,
        _ => Rectifier::None,
    };
    for (i, row) in acc.iter().enumerate() {
        for (h, &sum) in row.iter().enumerate() {
            let column = (L::N * h) as isize;
            // SAFETY: as the caller promises.
            unsafe {
                let v = if SCALED { L::mul(alpha, sum) } else { sum };
                let v = if FINISH == PLAIN {
                    v
                } else if SHORTCUT == NO_SHORTCUT {
                    finished::<L>(v, L::splat(*bias.add(i)), rectifier)
                } else {
                    let at = shortcut.wrapping_offset(i as isize * shortcut_stride + column);
                    shortcut_finished::<L>(
                        (v, L::splat(*bias.add(i))),
                        (L::load(at), SHORTCUT == SHORTCUT_FIRST),
                        at.wrapping_offset(ROWS as isize * shortcut_stride),
                        rectifier,
                    )
                };
                L::store(c.offset(i as isize * rsc + column), v);
            }
        }
    }
}

/// The `ROWS x WIDE` registers of [`kernel`]'s sums: A's `rows` (column
/// `p` at `p * csa`) against B's `kc` rows from `b`, `rsb` apart (the
/// third and fourth registers' columns `gap` values past the first and
/// second's), their
/// columns those `masks` keep, or whole registers with `WHOLE` (plain
/// loads, no test in the loop); with `AHEAD`, the runs of `ahead` asked
/// for, one a step.
///
/// # Safety
/// As [`kernel`].
#[inline(always)]
unsafe fn products<
    L: Lanes,
    const ROWS: usize,
    const WIDE: usize,
    const AHEAD: bool,
    const WHOLE: bool,
>(
    (kc, rows, csa, (b, rsb, gap)): (usize, [*const f32; ROWS], isize, (*const f32, isize, isize)),
    masks: [L::M; WIDE],
    ahead: Ahead,
) -> [[L::V; WIDE]; ROWS] {
    // SAFETY: `L`'s instructions are enabled, per the caller.
    let mut acc = [[unsafe { L::zero() }; WIDE]; ROWS];
    // One step of the depth: a macro rather than a closure, so that it
    // is compiled with the caller's instructions.
    macro_rules! step {
        ($p:expr) => {
            // SAFETY: p < kc, so row p of B's block (its first `cols`
            // values, the masks keep the rest unread) and column p of
            // A's rows are inside them.
            unsafe {
                let p: usize = $p;
                let row = b.offset(p as isize * rsb);
                let mut bv = [L::zero(); WIDE];
                for (half, v) in bv.iter_mut().enumerate() {
                    let at = row
                        .wrapping_offset(gap * (half / 2) as isize)
                        .wrapping_add(half % 2 * L::N);
                    *v = if WHOLE {
                        L::load(at)
                    } else {
                        L::load_masked(masks[half], at)
                    };
                }
                let col = p as isize * csa;
                for (acc, row) in acc.iter_mut().zip(rows) {
                    let ai = L::splat(*row.offset(col));
                    for (acc, &b) in acc.iter_mut().zip(&bv) {
                        *acc = L::fmadd(ai, b, *acc);
                    }
                }
            }
        };
    }
    // The steps that ask for the runs of `ahead` run first, in a loop
    // of their own, so the others carry no test.
    let every = ahead.every.max(1);
    let asking = if AHEAD {
        (kc / every).min(ahead.rows.saturating_mul(ahead.runs))
    } else {
        0
    };
    let (mut ahead_row, mut ahead_column) = (0, 0);
    let mut p = 0;
    for _ in 0..asking {
        let at = ahead
            .at
            .wrapping_offset(ahead_row as isize * ahead.row_stride + ahead_column);
        // SAFETY: a prefetch reads nothing.
        unsafe {
            _mm_prefetch::<_MM_HINT_T1>(at as *const i8);
            _mm_prefetch::<_MM_HINT_T1>(at.wrapping_add(16) as *const i8);
            if ahead.three_lines {
                _mm_prefetch::<_MM_HINT_T1>(at.wrapping_add(NR - 1) as *const i8);
            }
        }
        ahead_row += 1;
        if ahead_row == ahead.rows {
            ahead_row = 0;
            ahead_column += NR as isize;
        }
        for _ in 0..every {
            step!(p);
            p += 1;
        }
    }
    for p in p..kc {
        step!(p);
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every height the families tile by, on widths that fill their
    /// tiles, leave a short last one, or give no whole one: tile `t`'s
    /// run `p` holds row `p`'s columns from `t mr`, the last column again
    /// past the row's end.
    #[test]
    fn tiles_of_columns_hold_their_rows_values() {
        for mr in Avx512::TILE_ROWS.into_iter().chain(Avx2::TILE_ROWS) {
            for n in [1, mr - 1, mr, mr + 1, 3 * mr, 3 * mr + 2] {
                let k = 5;
                let b: Vec<f32> = (0..k * n).map(|v| v as f32).collect();
                let mut tiled = Vec::new();
                tile_columns(&b, (k, n), mr, &mut tiled);
                for t in 0..n.div_ceil(mr) {
                    for p in 0..k {
                        let run = &tiled[(t * k + p) * mr..][..mr];
                        let want: Vec<f32> = (0..mr)
                            .map(|r| b[p * n + (t * mr + r).min(n - 1)])
                            .collect();
                        assert_eq!(run, &want[..], "mr {mr}, n {n}, tile {t}, run {p}");
                    }
                }
            }
        }
    }
}
