//! BLAS level 2 and 3: row-major gemm and gemv with Caffe's conventions.
//!
//! gemm runs on `matrixmultiply`, a maintained pure-Rust kernel with
//! runtime AVX/FMA dispatch, except f32 products of small layers on
//! AVX-512 and AVX2 + FMA machines, which run on this crate's own kernel
//! (faster there: see `sgemm`); one piece per core (cut here, on rayon's pool,
//! the one pool of the crate); no system BLAS is needed to build.

use super::{cores, on_cores, vectorized};
use crate::Real;
use crate::real::sealed::Sealed;

/// Whether an operand is used as stored or transposed (CBLAS `CblasNoTrans`
/// / `CblasTrans`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transpose {
    /// Use the matrix as stored.
    No,
    /// Use the transpose of the stored matrix.
    Yes,
}

/// Values in a row of the panels [`gemm_filled`] asks for: the columns
/// of C its kernel computes at a time (two AVX-512 registers, four AVX2
/// ones).
pub const PANEL_COLUMNS: usize = 32;

/// Row-major `C = A * B + beta * C` (`A` of `m x k`, `C` of `m x n`;
/// with `beta == 0`, `C` is never read) for an `f32` `B` of `k x n`
/// that is never stored whole: `fill(rows, cols, panel)`
/// writes rows `rows` and columns `cols` of it (at most
/// [`PANEL_COLUMNS`] columns), row `p` of them at
/// `panel[p * PANEL_COLUMNS..]`, each just before the product uses it.
/// This is Caffe's convolution product (`forward_cpu_gemm`, and with
/// `beta == 1` its weight gradient, `weight_cpu_gemm`) with its column
/// buffer built a panel at a time in cache, rather than by a whole
/// im2col first ([`panel_from_columns`] moves columns that lie in
/// memory). It runs on an AVX-512 or AVX2 machine, any shape, and says whether
/// it ran (`false`: nothing was filled or written). For the shapes where
/// `gemm` runs the same kernel ([`gemm_filled_suits`]), the sums are
/// `gemm`'s, in the same order, so the same bits as `gemm` of the stored
/// `B`; for larger ones `gemm` of a stored `B` is the faster product,
/// unless storing `B` costs more than the difference (a strided
/// window's im2col).
///
/// ```
/// use blob_kernels::cpu::{PANEL_COLUMNS, gemm_filled};
/// // B = 2 x 3, row p column q holding p + q; A = [[1, 10]].
/// let mut c = [0.0f32; 3];
/// let fill = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>, panel: &mut [f32]| {
///     for (i, p) in rows.enumerate() {
///         for (j, q) in cols.clone().enumerate() {
///             panel[i * PANEL_COLUMNS + j] = (p + q) as f32;
///         }
///     }
/// };
/// let ran = gemm_filled(1, 3, 2, &[1.0, 10.0], fill, 0.0, &mut c);
/// if ran {
///     assert_eq!(c, [10.0, 21.0, 32.0]);
/// }
/// ```
///
/// # Panics
/// If `a` or `c` is shorter than its matrix.
#[track_caller]
pub fn gemm_filled(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    fill: impl FnMut(std::ops::Range<usize>, std::ops::Range<usize>, &mut [f32]),
    beta: f32,
    c: &mut [f32],
) -> bool {
    gemm_filled_into(m, n, k, a, fill, beta, (c, n))
}

/// [`gemm_filled`] into an `m x n` block of a larger row-major matrix,
/// its rows `ldc` apart from `c[0]`: a band of a convolution's output
/// rows, whose channels' planes lie a whole plane apart. The same sums,
/// so the same bits, as the product of the whole.
///
/// ```
/// use blob_kernels::cpu::gemm_filled_into;
/// // C's columns 1..3 of a 1 x 4 row: A = [[2]], B = [[1, 2]].
/// let mut c = [9.0f32; 4];
/// let fill = |_: std::ops::Range<usize>, cols: std::ops::Range<usize>, panel: &mut [f32]| {
///     for (j, q) in cols.enumerate() {
///         panel[j] = (q + 1) as f32;
///     }
/// };
/// if gemm_filled_into(1, 2, 1, &[2.0], fill, 0.0, (&mut c[1..], 4)) {
///     assert_eq!(c, [9.0, 2.0, 4.0, 9.0]);
/// }
/// ```
///
/// # Panics
/// If `a` is shorter than its matrix, `ldc` less than `n`, or `c`
/// shorter than the block.
#[track_caller]
pub fn gemm_filled_into(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    mut fill: impl FnMut(std::ops::Range<usize>, std::ops::Range<usize>, &mut [f32]),
    beta: f32,
    (c, ldc): (&mut [f32], usize),
) -> bool {
    let c_len = if m == 0 { 0 } else { (m - 1) * ldc + n };
    assert!(
        a.len() >= m * k && ldc >= n && c.len() >= c_len,
        "gemm_filled: {m}x{k} * {k}x{n} needs A of {} elements and C of {c_len} with rows at \
         least {n} apart, got {}, {} and {ldc}",
        m * k,
        a.len(),
        c.len()
    );
    if m == 0 || n == 0 || k == 0 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the assert above proves A's `m x k` values and C's `m` rows
    // of `n`, `ldc` apart, inside their slices; `c` is a unique borrow,
    // aliasing nothing.
    return unsafe {
        super::sgemm::run_filled(
            (m, k, n),
            (a.as_ptr(), [k as isize, 1]),
            &mut fill,
            beta,
            (c.as_mut_ptr(), ldc),
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether [`gemm_filled`] runs an `m x n` product of depth `k` with
/// the kernel `gemm` itself runs for that shape on this machine (an
/// AVX-512 or AVX2 machine, a small layer's shape), so with `gemm`'s bits, and
/// as the faster way to a product whose B would otherwise be stored (a
/// caller can skip preparing what its fill reads). A shallower product
/// of the same `m` and `n` suits too.
///
/// ```
/// use blob_kernels::cpu::{Isa, gemm_filled_suits, isa};
/// assert_eq!(gemm_filled_suits(50, 500, 256), isa() >= Isa::Avx2);
/// ```
pub fn gemm_filled_suits(m: usize, n: usize, k: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::sgemm::filled_suits(m, n, k);
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether [`gemm`] takes an `f32` product `C = A B^T` (`A` of `m x k`
/// and `B` of `n x k`, both row-major: `Transpose::No, Transpose::Yes`)
/// of few columns as dot products of A's and B's rows, A read once where
/// it lies: an AVX-512 or AVX2 machine, at most 9 columns, a depth of
/// 256 or more, any height. A convolution onto a 1 x 1 to 3 x 3 output
/// (SSD's last layers) passes its im2col by pixel as B.
///
/// ```
/// use blob_kernels::cpu::{Isa, gemm_few_columns_as_dots, isa};
/// assert_eq!(gemm_few_columns_as_dots(4, 1152), isa() >= Isa::Avx2);
/// assert!(!gemm_few_columns_as_dots(25, 1152));
/// assert!(!gemm_few_columns_as_dots(4, 100));
/// ```
pub fn gemm_few_columns_as_dots(n: usize, k: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::isa() >= super::Isa::Avx2
        && n <= super::sgemm::DOTS_FEW_COLUMNS
        && k >= super::sgemm::DOTS_FEW_MIN_DEPTH;
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether an `f32` product `C = A B` (`A` of `m x k`, `C` of `m x n`)
/// runs faster through [`gemm_packed`], A packed once by
/// [`pack_for_gemm_packed`]: an AVX-512 or AVX2 machine, a C with few columns for
/// the kernel's panels of [`PANEL_COLUMNS`] and rows enough to fill
/// them, as a 1x1 convolution's product on a 7 x 7 or 10 x 10 output
/// (49 or 100 columns, of 64 or 128 computed). Such a product is
/// computed as its transpose, with the same sums in the same order as
/// [`gemm`]'s, so the same bits.
///
/// ```
/// use blob_kernels::cpu::{Isa, gemm_packed_suits, isa};
/// assert_eq!(gemm_packed_suits(512, 49, 4608), isa() >= Isa::Avx2);
/// assert!(!gemm_packed_suits(512, 64, 4608));
/// ```
pub fn gemm_packed_suits(m: usize, n: usize, k: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::sgemm::transposed_suits(m, n, k);
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Values [`pack_for_gemm_packed`] writes for an `m x k` A.
///
/// ```
/// assert_eq!(blob_kernels::cpu::gemm_packed_len(50, 3), 64 * 3);
/// ```
pub fn gemm_packed_len(m: usize, k: usize) -> usize {
    m.next_multiple_of(PANEL_COLUMNS).saturating_mul(k)
}

/// Packs the row-major `m x k` A (a convolution's weights, Caffe's `(cout,
/// cin * kh * kw)`) for [`gemm_packed`]: A's transpose in panels of
/// [`PANEL_COLUMNS`] of A's rows, the layout the kernel reads. A layer
/// keeps the pack while its weights stay unchanged. Returns `false`, and
/// writes nothing, where [`gemm_packed`] cannot run (neither AVX-512
/// nor AVX2).
///
/// ```
/// use blob_kernels::cpu::{gemm_packed_len, pack_for_gemm_packed};
/// let a = [1.0f32; 6];
/// let mut packed = vec![0.0; gemm_packed_len(2, 3)];
/// let _ran = pack_for_gemm_packed(&a, 2, 3, &mut packed);
/// ```
///
/// # Panics
/// If `a` holds fewer than `m * k` values or `packed` fewer than
/// [`gemm_packed_len`]`(m, k)`.
#[track_caller]
pub fn pack_for_gemm_packed(a: &[f32], m: usize, k: usize, packed: &mut [f32]) -> bool {
    let len = gemm_packed_len(m, k);
    assert!(
        a.len() >= m * k && packed.len() >= len,
        "pack_for_gemm_packed: a {m} x {k} A needs {} values and a pack of {len}, got {} and {}",
        m * k,
        a.len(),
        packed.len()
    );
    #[cfg(target_arch = "x86_64")]
    if super::isa() >= super::Isa::Avx2 {
        // SAFETY: the kernels run here; the assert put A's values and the
        // pack's inside their slices.
        unsafe { super::sgemm::pack_transposed(a.as_ptr(), (m, k), &mut packed[..len]) };
        return true;
    }
    false
}

/// Row-major `C = A B` (`A` of `m x k`, packed by
/// [`pack_for_gemm_packed`]; `B` of `k x n`; `C` of `m x n`, overwritten)
/// where [`gemm_packed_suits`]: computed as `C^T = B^T A^T` a panel of
/// [`PANEL_COLUMNS`] of A's rows at a time, each transposed into C while
/// it is in cache; the panels cut across the cores for large products.
/// The same bits as [`gemm`] of the unpacked A. Returns `false`, and
/// writes nothing, where it cannot run (neither AVX-512 nor AVX2).
///
/// ```
/// use blob_kernels::cpu::{gemm, gemm_packed, gemm_packed_len, pack_for_gemm_packed, Transpose};
/// let (m, n, k) = (40, 9, 16);
/// let a: Vec<f32> = (0..m * k).map(|v| (v % 7) as f32 - 3.0).collect();
/// let b: Vec<f32> = (0..k * n).map(|v| (v % 5) as f32 * 0.5).collect();
/// let mut packed = vec![0.0; gemm_packed_len(m, k)];
/// if pack_for_gemm_packed(&a, m, k, &mut packed) {
///     let mut c = vec![0.0; m * n];
///     assert!(gemm_packed(m, n, k, &packed, &b, &mut c));
///     let mut want = vec![0.0; m * n];
///     gemm(Transpose::No, Transpose::No, m, n, k, 1.0, &a, &b, 0.0, &mut want);
///     assert_eq!(c, want);
/// }
/// ```
///
/// # Panics
/// If a slice is shorter than its matrix, or the pack than
/// [`gemm_packed_len`]`(m, k)`.
#[track_caller]
pub fn gemm_packed(m: usize, n: usize, k: usize, packed: &[f32], b: &[f32], c: &mut [f32]) -> bool {
    assert!(
        packed.len() >= gemm_packed_len(m, k) && b.len() >= k * n && c.len() >= m * n,
        "gemm_packed: {m}x{k} * {k}x{n} needs a pack of {}, B of {} and C of {} values, \
         got {}, {}, {}",
        gemm_packed_len(m, k),
        k * n,
        m * n,
        packed.len(),
        b.len(),
        c.len()
    );
    #[cfg(target_arch = "x86_64")]
    if super::isa() >= super::Isa::Avx2 {
        if m == 0 || n == 0 {
            return true;
        }
        // Whole panels of A's rows a piece.
        let panels = m.div_ceil(PANEL_COLUMNS);
        let per_piece = panels.div_ceil(gemm_pieces(m, n, k).min(panels)) * PANEL_COLUMNS;
        let b = &b[..k * n];
        let pieces = c[..m * n].chunks_mut(per_piece * n).enumerate();
        on_cores(pieces, |(q, c)| {
            let packed = &packed[q * per_piece * k..];
            // SAFETY: the kernels run here; this piece's panels, B, and
            // its rows of C are inside their slices (the assert), and `c`
            // is this piece's alone.
            unsafe {
                super::sgemm::run_transposed(
                    (c.len() / n, k, n),
                    packed.as_ptr(),
                    b.as_ptr(),
                    c.as_mut_ptr(),
                )
            };
        });
        return true;
    }
    false
}

/// Values [`pack_panels`] writes for a `k x n` B.
///
/// ```
/// assert_eq!(blob_kernels::cpu::panels_len(3, 40), 3 * 64);
/// ```
pub fn panels_len(k: usize, n: usize) -> usize {
    n.next_multiple_of(PANEL_COLUMNS).saturating_mul(k)
}

/// Packs the row-major `k x n` B for [`gemm_panels`]: panel `q` holds
/// B's columns `32 q..32 q + 32` as `k` rows of [`PANEL_COLUMNS`]
/// values, zero past B's last column. A layer whose B is its weights
/// packs them once; the product then reads each panel front to back,
/// which the hardware's prefetchers follow where B lives beyond the
/// caches (rows of a wide row-major B lie kilobytes apart).
///
/// ```
/// use blob_kernels::cpu::{PANEL_COLUMNS, pack_panels, panels_len};
/// let b = [1.0f32, 2.0, 3.0, 4.0]; // 2 x 2
/// let mut panels = vec![f32::NAN; panels_len(2, 2)];
/// pack_panels(&b, 2, 2, &mut panels);
/// assert_eq!(panels[..3], [1.0, 2.0, 0.0]);
/// assert_eq!(panels[PANEL_COLUMNS..PANEL_COLUMNS + 2], [3.0, 4.0]);
/// ```
///
/// # Panics
/// If `b` holds fewer than `k * n` values or `panels` fewer than
/// [`panels_len`]`(k, n)`.
#[track_caller]
pub fn pack_panels(b: &[f32], k: usize, n: usize, panels: &mut [f32]) {
    let len = panels_len(k, n);
    assert!(
        b.len() >= k * n && panels.len() >= len,
        "pack_panels: a {k} x {n} B needs {} values and panels of {len}, got {} and {}",
        k * n,
        b.len(),
        panels.len()
    );
    if n == 0 {
        return;
    }
    for (q, panel) in panels[..len]
        .chunks_exact_mut(k * PANEL_COLUMNS)
        .enumerate()
    {
        let cols = PANEL_COLUMNS.min(n - q * PANEL_COLUMNS);
        for (row, from) in panel.chunks_exact_mut(PANEL_COLUMNS).zip(b.chunks_exact(n)) {
            row[..cols].copy_from_slice(&from[q * PANEL_COLUMNS..][..cols]);
            row[cols..].fill(0.0);
        }
    }
}

/// Row-major `C = A B` (`A` of `m x k`; `B` of `k x n`, packed by
/// [`pack_panels`]; `C` of `m x n`, overwritten): the product of
/// [`gemm`], its panels read from the pack instead of from B, so with
/// the same sums in the same order as `gemm` where `gemm` runs this
/// crate's kernel. Large products are cut across the cores by whole
/// panels. `then`, where the caller multiplies another pack of the
/// same shape next (Winograd's points, one after another), is asked
/// for as the last tiles run, each core its own panels of it: a pack
/// that lives beyond the caches is then on its way when its product
/// starts.
///
/// ```
/// use blob_kernels::cpu::{gemm, gemm_panels, pack_panels, panels_len, Transpose};
/// let (m, n, k) = (12, 40, 16);
/// let a: Vec<f32> = (0..m * k).map(|v| (v % 7) as f32 - 3.0).collect();
/// let b: Vec<f32> = (0..k * n).map(|v| (v % 5) as f32 * 0.5).collect();
/// let mut panels = vec![0.0; panels_len(k, n)];
/// pack_panels(&b, k, n, &mut panels);
/// let mut c = vec![0.0; m * n];
/// gemm_panels(m, n, k, &a, (&panels, None), &mut c);
/// let mut want = vec![0.0; m * n];
/// gemm(Transpose::No, Transpose::No, m, n, k, 1.0, &a, &b, 0.0, &mut want);
/// assert_eq!(c, want);
/// ```
///
/// # Panics
/// If `a` or `c` is shorter than its matrix, or `panels` or `then`
/// than [`panels_len`]`(k, n)`.
#[track_caller]
pub fn gemm_panels(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    (panels, then): (&[f32], Option<&[f32]>),
    c: &mut [f32],
) {
    assert!(
        a.len() >= m * k
            && panels.len() >= panels_len(k, n)
            && then.is_none_or(|t| t.len() >= panels_len(k, n))
            && c.len() >= m * n,
        "gemm_panels: {m}x{k} * {k}x{n} needs A of {}, panels (and the next pack) of {} and \
         C of {} values, got {}, {} (next {:?}), {}",
        m * k,
        panels_len(k, n),
        m * n,
        a.len(),
        panels.len(),
        then.map(<[f32]>::len),
        c.len()
    );
    let c = &mut c[..m * n];
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    let count = n.div_ceil(PANEL_COLUMNS);
    let per_piece = count.div_ceil(gemm_pieces(m, n, k).min(count));
    let (a, panels, then, c) = (
        Operand(a.as_ptr(), [k as isize, 1]),
        Operand(panels.as_ptr(), [PANEL_COLUMNS as isize, 1]),
        then.map(|t| Operand(t.as_ptr(), [PANEL_COLUMNS as isize, 1])),
        Output(c.as_mut_ptr()),
    );
    on_cores(0..count.div_ceil(per_piece), |piece| {
        let first = piece * per_piece * PANEL_COLUMNS;
        let cols = (per_piece * PANEL_COLUMNS).min(n - first);
        // SAFETY: the assert put A's `m x k` values, the pack's panels and
        // C's `m x n` values inside their slices; this piece's panels
        // start at column `first` and its `cols` columns of C are its
        // alone (the pieces' columns are disjoint).
        unsafe {
            let (a_at, panels_at, c_at) = (a.at(0), panels.at(first * k), c.at(first));
            #[cfg(target_arch = "x86_64")]
            let then_at = then.map_or(std::ptr::null(), |t| t.at(first * k));
            if super::sgemm::run_panels(
                (m, k, cols),
                a_at,
                (panels_at, then_at),
                (c_at, n as isize),
            ) {
                return;
            }
            for q in 0..cols.div_ceil(PANEL_COLUMNS) {
                let width = PANEL_COLUMNS.min(cols - q * PANEL_COLUMNS);
                f32::matmul(
                    m,
                    k,
                    width,
                    1.0,
                    a_at,
                    [k as isize, 1],
                    panels_at.add(q * k * PANEL_COLUMNS),
                    [PANEL_COLUMNS as isize, 1],
                    0.0,
                    c_at.add(q * PANEL_COLUMNS),
                    [n as isize, 1],
                );
            }
        }
    });
}

/// Fills rows `0..rows` of a [`gemm_filled`] panel from columns that lie
/// in memory: `panel[p * PANEL_COLUMNS + j] = columns[j][p]`, and 0 in
/// the panel's columns past `columns.len()`. A convolution's weight
/// gradient reads its im2col rows this way, each a run of an image's
/// shifted copy, so the column buffer is neither built nor packed. On
/// AVX-512, 16 columns by 16 rows move at a time through registers (8 by
/// 8 on AVX2).
///
/// ```
/// use blob_kernels::cpu::{PANEL_COLUMNS, panel_from_columns};
/// let (a, b) = ([1.0f32, 2.0, 3.0], [4.0f32, 5.0, 6.0]);
/// let mut panel = vec![f32::NAN; 3 * PANEL_COLUMNS];
/// panel_from_columns(&[&a, &b], 3, &mut panel);
/// assert_eq!(panel[PANEL_COLUMNS..PANEL_COLUMNS + 3], [2.0, 5.0, 0.0]);
/// ```
///
/// # Panics
/// If there are more than [`PANEL_COLUMNS`] columns, a column is shorter
/// than `rows`, or `panel` shorter than `rows` panel rows.
#[track_caller]
pub fn panel_from_columns(columns: &[&[f32]], rows: usize, panel: &mut [f32]) {
    assert!(
        columns.len() <= PANEL_COLUMNS
            && columns.iter().all(|c| c.len() >= rows)
            && panel.len() >= rows * PANEL_COLUMNS,
        "panel_from_columns: {} columns of {rows} values into a panel of {} values",
        columns.len(),
        panel.len()
    );
    let panel = &mut panel[..rows * PANEL_COLUMNS];
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the assert put `rows` values behind each column pointer and
    // `rows` panel rows in `panel`.
    if unsafe {
        super::sgemm::transpose_columns_here(panel, |j| columns[j].as_ptr(), rows, columns.len())
    } {
        return;
    }
    for (p, row) in panel.chunks_exact_mut(PANEL_COLUMNS).enumerate() {
        for (j, value) in row.iter_mut().enumerate() {
            *value = columns.get(j).map_or(0.0, |c| c[p]);
        }
    }
}

/// Row-major `C = alpha * op(A) * op(B) + beta * C` (Caffe
/// `caffe_cpu_gemm`), with `op(A)` of `m x k`, `op(B)` of `k x n` and `C` of
/// `m x n`; leading dimensions are Caffe's (`lda = k` or `m`, `ldb = n` or
/// `k`, `ldc = n`). When `beta == 0`, `C` is never read, so it may hold NaN.
///
/// ```
/// use blob_kernels::cpu::{gemm, Transpose};
/// let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2x3
/// let b = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]; // 3x4
/// let mut c = [0.0f32; 8];
/// gemm(Transpose::No, Transpose::No, 2, 4, 3, 1.0, &a, &b, 0.0, &mut c);
/// assert_eq!(c, [38.0, 44.0, 50.0, 56.0, 83.0, 98.0, 113.0, 128.0]);
/// ```
///
/// # Panics
/// If a slice is shorter than its matrix.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn gemm<T: Real>(
    trans_a: Transpose,
    trans_b: Transpose,
    m: usize,
    n: usize,
    k: usize,
    alpha: T,
    a: &[T],
    b: &[T],
    beta: T,
    c: &mut [T],
) {
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "gemm: {m}x{k} * {k}x{n} needs A, B, C of {}, {}, {} elements, got {}, {}, {}",
        m * k,
        k * n,
        m * n,
        a.len(),
        b.len(),
        c.len()
    );
    let c = &mut c[..m * n];
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        scale_c(beta, c);
        return;
    }
    // One column or one row of C is a matrix-vector product: the gemm
    // kernels would fill one lane of their 32-column panels (MTCNN P-Net's
    // conv3 at 12 x 12, 32 x 1 x 144, took 3.7 us so).
    if n == 1 {
        // C = op(A) b: A stored m x k, or k x m for its transpose.
        let (a, b) = (&a[..m * k], &b[..k]);
        match trans_a {
            Transpose::No => gemv(Transpose::No, m, k, alpha, a, b, beta, c),
            Transpose::Yes => gemv(Transpose::Yes, k, m, alpha, a, b, beta, c),
        }
        return;
    }
    if m == 1 {
        // C^T = op(B)^T a: B stored k x n, or n x k for its transpose.
        let (a, b) = (&a[..k], &b[..k * n]);
        match trans_b {
            Transpose::No => gemv(Transpose::Yes, k, n, alpha, b, a, beta, c),
            Transpose::Yes => gemv(Transpose::No, n, k, alpha, b, a, beta, c),
        }
        return;
    }
    let (rsa, csa) = match trans_a {
        Transpose::No => (k, 1),
        Transpose::Yes => (1, m),
    };
    let (rsb, csb) = match trans_b {
        Transpose::No => (n, 1),
        Transpose::Yes => (1, k),
    };
    let a = Operand(a.as_ptr(), [rsa as isize, csa as isize]);
    let b = Operand(b.as_ptr(), [rsb as isize, csb as isize]);
    let c = Output(c.as_mut_ptr());
    // The block of C in rows `i0..i0 + mi` and columns `j0..j0 + nj`.
    let block = |i0: usize, mi: usize, j0: usize, nj: usize| {
        // SAFETY: the assert above proves A, B and C hold the `m x k`,
        // `k x n` and `m x n` matrices their strides reach, so a block's
        // offsets and extent stay inside them; `c` is a unique borrow, so
        // it aliases neither, and blocks never share an element of C.
        unsafe {
            T::matmul(
                mi,
                k,
                nj,
                alpha,
                a.at(i0 * rsa),
                a.1,
                b.at(j0 * csb),
                b.1,
                beta,
                c.at(i0 * n + j0),
                [n as isize, 1],
            )
        }
    };
    on_blocks(m, n, k, block);
}

/// The blocks of an `m x n` C of depth `k` that [`gemm`] computes one a
/// core: `(first row, rows, first column, columns)`, whole rows or whole
/// columns of C cut along its longer side.
fn blocks(m: usize, n: usize, k: usize) -> impl Iterator<Item = [usize; 4]> + Clone {
    let pieces = gemm_pieces(m, n, k);
    let (rows, cols) = if pieces == 1 {
        (m, n)
    } else if m >= n {
        (m.div_ceil(pieces).next_multiple_of(8), n)
    } else {
        (m, n.div_ceil(pieces).next_multiple_of(16))
    };
    let (rows, cols) = (rows.max(1), cols.max(1));
    (0..m.div_ceil(rows)).flat_map(move |i| {
        (0..n.div_ceil(cols)).map(move |j| {
            let (i0, j0) = (i * rows, j * cols);
            [i0, rows.min(m - i0), j0, cols.min(n - j0)]
        })
    })
}

/// Runs `block(first row, rows, first column, columns)` over [`blocks`],
/// on the cores where there are several.
fn on_blocks(m: usize, n: usize, k: usize, block: impl Fn(usize, usize, usize, usize) + Sync) {
    let all = blocks(m, n, k);
    if all.clone().nth(1).is_none() {
        for [i0, mi, j0, nj] in all {
            block(i0, mi, j0, nj);
        }
        return;
    }
    on_cores(all, |[i0, mi, j0, nj]| block(i0, mi, j0, nj));
}

/// Row-major `C = A B` (`A` of `m x k`, `B` of `k x n`, `C` of `m x n`,
/// overwritten), each value of row `i` then finished by `finish` (its
/// bias added, then its shortcut where there is one, then rectified):
/// Caffe's convolution forward (`forward_cpu_gemm`, then
/// `forward_cpu_bias`, and the Eltwise SUM and `ReLU` a net folds into
/// it) with C written once, each tile finished as the
/// kernel stores it, rather than written by the product and passed
/// over again. The same bits as [`gemm`] and then `finish` on each
/// value. Returns `false`, and writes nothing, where `gemm` would not
/// run this crate's kernel for the shape (no AVX-512 or AVX2, a
/// product of one row or column, a C too large): the caller then runs
/// both.
///
/// ```
/// use blob_kernels::cpu::{gemm, gemm_finished, Rectifier, RowFinish, Shortcut, Transpose};
/// let (m, n, k) = (12, 40, 16);
/// let a: Vec<f32> = (0..m * k).map(|v| (v % 7) as f32 - 3.0).collect();
/// let b: Vec<f32> = (0..k * n).map(|v| (v % 5) as f32 * 0.5 - 1.0).collect();
/// let bias: Vec<f32> = (0..m).map(|i| i as f32 - 6.0).collect();
/// let shortcut: Vec<f32> = (0..m * n).map(|v| (v % 3) as f32 - 1.0).collect();
/// let shortcut = Some(Shortcut { values: &shortcut, first: true });
/// let finish = RowFinish { bias: &bias, shortcut, rectifier: Rectifier::Relu };
/// let mut c = vec![0.0; m * n];
/// if gemm_finished(m, n, k, &a, &b, finish, &mut c) {
///     let mut want = vec![0.0; m * n];
///     gemm(Transpose::No, Transpose::No, m, n, k, 1.0, &a, &b, 0.0, &mut want);
///     for (at, v) in want.iter_mut().enumerate() {
///         *v = finish.apply(at / n, at, *v);
///     }
///     assert_eq!(c, want);
/// }
/// ```
///
/// # Panics
/// If a slice is shorter than its matrix, the bias than C's rows, or
/// the shortcut than C.
#[track_caller]
pub fn gemm_finished(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    finish: super::RowFinish<'_>,
    c: &mut [f32],
) -> bool {
    assert!(
        a.len() >= m * k
            && b.len() >= k * n
            && c.len() >= m * n
            && finish.bias.len() >= m
            && finish.shortcut.is_none_or(|s| s.values.len() >= m * n),
        "gemm_finished: {m}x{k} * {k}x{n} needs A, B, C, a bias and a shortcut of {}, {}, {}, \
         {m} and {} values, got {}, {}, {}, {} and {:?}",
        m * k,
        k * n,
        m * n,
        m * n,
        a.len(),
        b.len(),
        c.len(),
        finish.bias.len(),
        finish.shortcut.map(|s| s.values.len())
    );
    #[cfg(target_arch = "x86_64")]
    {
        use super::sgemm;
        // Each block as `gemm` would compute it, so each through the
        // kernel or none.
        if m < 2 || n < 2 || !blocks(m, n, k).all(|[_, mi, _, nj]| sgemm::finished_suits(mi, nj, k))
        {
            return false;
        }
        let (a, b, c) = (
            Operand(a.as_ptr(), [k as isize, 1]),
            Operand(b.as_ptr(), [n as isize, 1]),
            Output(c.as_mut_ptr()),
        );
        on_blocks(m, n, k, |i0, mi, j0, nj| {
            // SAFETY: the assert proves A's, B's and C's matrices and the
            // bias of C's rows inside their slices, so each block's; `c`
            // is a unique borrow, and blocks share no element of C; the
            // kernel runs each block's shape (`finished_suits`).
            unsafe {
                sgemm::run_finished(
                    (mi, k, nj),
                    (a.at(i0 * k), k),
                    (b.at(j0), n),
                    (c.at(i0 * n + j0), n),
                    sgemm::Finish::of(&finish, (i0, j0, n)),
                )
            }
        });
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Rows of a gemv computed together: `x` is read once for all of them,
/// and as many streams of the matrix are in flight at once. On a Zen 4
/// core (2026-11-30, one thread, 4096 x 4096 from memory, prefetching 2
/// KB ahead into L2): 4 rows 24.1 GB/s, 6 27.3, 8 27.0, 12 24.2.
/// Earlier, 1 row to 4 took CaffeNet's fc6 at batch 1 from 8.2 to 6.0 ms.
const ROWS_AT_ONCE: usize = 8;

/// The dot products of `x` with each of the (up to [`ROWS_AT_ONCE`])
/// rows of `n` values in `a`; unused entries are 0. Each row sums in 8
/// lanes (a ymm register: the gemv waits on memory, and 8 rows of 16
/// lanes would not fit AVX2's 16 registers), added pairwise at the end,
/// then its tail.
#[inline(always)]
fn row_dots<T: Real, const AHEAD: bool>(a: &[T], n: usize, x: &[T]) -> [T; ROWS_AT_ONCE] {
    const L: usize = 8;
    let count = a.len() / n.max(1);
    // Missing rows repeat the first: the loop stays one shape.
    let rows: [&[T]; ROWS_AT_ONCE] =
        std::array::from_fn(|i| &a[if i < count { i } else { 0 } * n..][..n]);
    let (xc, xt) = x.as_chunks::<L>();
    let chunks = rows.map(|r| &r.as_chunks::<L>().0[..xc.len()]);
    let mut acc = [[T::ZERO; L]; ROWS_AT_ONCE];
    for (j, xv) in xc.iter().enumerate() {
        for (acc, chunks) in acc.iter_mut().zip(&chunks) {
            let c = &chunks[j];
            if AHEAD && (j * L * size_of::<T>()).is_multiple_of(64) {
                // One request a 64-byte line.
                super::vector::prefetch_to_l2_ahead::<GEMV_PREFETCH_BYTES, T>(c);
            }
            for l in 0..L {
                acc[l] += c[l] * xv[l];
            }
        }
    }
    let tail = xc.len() * L;
    std::array::from_fn(|i| {
        if i >= count {
            return T::ZERO;
        }
        let mut v = acc[i];
        let mut width = L;
        while width > 1 {
            width /= 2;
            for j in 0..width {
                v[j] += v[j + width];
            }
        }
        rows[i][tail..]
            .iter()
            .zip(xt)
            .fold(v[0], |s, (&p, &q)| s + p * q)
    })
}

/// How far ahead of its reads a gemv asks for each row's lines into
/// L2, when the matrix is [`GEMV_PREFETCH_MIN_BYTES`] or more: the
/// hardware's own prefetching, following four rows at once, left
/// CaffeNet's fc6 (4096 x 9216, 151 MB) at 28 GB/s on a Zen 5 core,
/// where one stream reads 41 (2026-11-27, one thread, into L1: fc6 5.32
/// -> 4.42 ms, fc7 2.69 -> 2.18, fc8 0.70 -> 0.55; 1 KB ahead 34 GB/s, 2
/// KB 36, 4 KB 33). On a Zen 4 core, into L1 cost 10% with 4 rows and
/// 30% with 8; into L2 gained 20% and 4% (2026-11-30).
const GEMV_PREFETCH_BYTES: usize = 2048;

/// The smallest matrix, in bytes, a gemv reads ahead in: smaller ones
/// are in cache when used again soon, where the requests only cost (256
/// x 1152 in L2: 18 -> 22 µs).
const GEMV_PREFETCH_MIN_BYTES: usize = 8 << 20;

/// From this many matrix elements (256 KB of f32) a gemv's rows are
/// shared across the cores: each core reads its half from its own cache
/// on every pass (at batch 1, two threads: O-Net's conv5, 256 x 1152,
/// 23 -> 14 µs; R-Net's conv4, 128 x 576, 8.5 -> 5.6 µs).
const PARALLEL_GEMV_MIN: usize = 1 << 16;

/// Below this many multiply-adds a gemm runs on one core: about 5 µs of
/// work, against 1-2 µs to hand half of it to a helper that is awake
/// (O-Net's conv1 at batch 1, 32 x 2116 x 27, two threads: 51 -> 38 µs).
const PARALLEL_GEMM_MIN: usize = 1 << 19;

/// How many pieces a gemm is cut into, along the longer of C's sides: one
/// per core for large products. matrixmultiply's own threads split only
/// products whose sides span several of its blocks, which leaves the
/// layers' gemms (50 x 256 x 500 in LeNet's conv2) on one core.
fn gemm_pieces(m: usize, n: usize, k: usize) -> usize {
    let work = m.saturating_mul(n).saturating_mul(k);
    if work < PARALLEL_GEMM_MIN {
        return 1;
    }
    let longest = m.max(n);
    cores()
        .min(work / PARALLEL_GEMM_MIN)
        .min(longest / 16)
        .max(1)
}

/// A read-only matrix operand handed to the pieces of a parallel gemm.
#[derive(Clone, Copy)]
struct Operand<T>(*const T, [isize; 2]);

/// The output matrix of a parallel gemm, written by disjoint pieces.
#[derive(Clone, Copy)]
struct Output<T>(*mut T);

// Methods rather than fields in the pieces' closures, which would
// otherwise capture the bare pointer field instead of the wrapper.
impl<T> Operand<T> {
    /// The element `offset` past the start.
    ///
    /// # Safety
    /// `offset` is inside the operand's slice.
    unsafe fn at(self, offset: usize) -> *const T {
        // SAFETY: per the contract.
        unsafe { self.0.add(offset) }
    }
}

impl<T> Output<T> {
    /// The element `offset` past the start.
    ///
    /// # Safety
    /// `offset` is inside the output's slice.
    unsafe fn at(self, offset: usize) -> *mut T {
        // SAFETY: per the contract.
        unsafe { self.0.add(offset) }
    }
}

// SAFETY: `Operand` points into a shared borrow of `[T]` that outlives the
// parallel loop, and is only read; `T: Sync` makes the reads from other
// threads sound.
unsafe impl<T: Sync> Send for Operand<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Operand<T> {}
// SAFETY: `Output` points into a unique borrow of `[T]` that outlives the
// parallel loop; each piece writes its own rows or columns only.
unsafe impl<T: Send> Send for Output<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Output<T> {}

fn scale_c<T: Real>(beta: T, c: &mut [T]) {
    if beta == T::ZERO {
        c.fill(T::ZERO);
    } else {
        super::scal(beta, c);
    }
}

/// Row-major `y = alpha * op(A) * x + beta * y` (Caffe `caffe_cpu_gemv`),
/// where `A` is always stored `m x n`: with [`Transpose::No`] `x` has `n`
/// and `y` has `m` elements, with [`Transpose::Yes`] the reverse. When
/// `beta == 0`, `y` is never read.
///
/// ```
/// use blob_kernels::cpu::{gemv, Transpose};
/// let a = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2x3
/// let mut y = [0.0f64; 2];
/// gemv(Transpose::No, 2, 3, 1.0, &a, &[1.0, 2.0, 3.0], 0.0, &mut y);
/// assert_eq!(y, [14.0, 32.0]);
/// let mut yt = [0.0f64; 3];
/// gemv(Transpose::Yes, 2, 3, 1.0, &a, &[1.0, 2.0], 0.0, &mut yt);
/// assert_eq!(yt, [9.0, 12.0, 15.0]);
/// ```
///
/// # Panics
/// If a slice does not have its matrix's or vector's length.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn gemv<T: Real>(
    trans: Transpose,
    m: usize,
    n: usize,
    alpha: T,
    a: &[T],
    x: &[T],
    beta: T,
    y: &mut [T],
) {
    let (xn, yn) = match trans {
        Transpose::No => (n, m),
        Transpose::Yes => (m, n),
    };
    assert!(
        a.len() >= m * n && x.len() == xn && y.len() == yn,
        "gemv: A {m}x{n} with op {trans:?} needs A, x, y of {}, {xn}, {yn} elements, got {}, {}, {}",
        m * n,
        a.len(),
        x.len(),
        y.len()
    );
    if n == 0 || m == 0 {
        scale_c(beta, y);
        return;
    }
    match trans {
        Transpose::No => {
            // A large matrix (an fc layer at batch 1: 150 MB in CaffeNet's
            // fc6) is read at the speed of memory; rows on every core
            // read it faster. Each row's dot is the same either way.
            let parts = if m.saturating_mul(n) >= PARALLEL_GEMV_MIN {
                cores()
            } else {
                1
            };
            let rows = m.div_ceil(parts).next_multiple_of(ROWS_AT_ONCE);
            let ahead = m * n * size_of::<T>() >= GEMV_PREFETCH_MIN_BYTES;
            on_cores(y.chunks_mut(rows).zip(a.chunks(rows * n)), |(y, a)| {
                vectorized(
                    #[inline(always)]
                    || {
                        for (y, a) in y.chunks_mut(ROWS_AT_ONCE).zip(a.chunks(ROWS_AT_ONCE * n)) {
                            let dots = if ahead {
                                row_dots::<T, true>(a, n, x)
                            } else {
                                row_dots::<T, false>(a, n, x)
                            };
                            for (yi, d) in y.iter_mut().zip(dots) {
                                let d = alpha * d;
                                *yi = if beta == T::ZERO { d } else { d + beta * *yi };
                            }
                        }
                    },
                )
            });
        }
        Transpose::Yes => {
            scale_c(beta, y);
            for (&xi, row) in x.iter().zip(a.chunks_exact(n)) {
                super::axpy(alpha * xi, row, y);
            }
        }
    }
}
