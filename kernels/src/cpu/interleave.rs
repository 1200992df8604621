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
    interleave_rows(runs, (1, len), len, lanes);
}

/// [`interleave_runs`] for runs that are planes of `rows x width`, each
/// row of vectors `row_stride` pixels from the last in `lanes`:
/// `lanes[(y * row_stride + x) * 16 + l] = runs[l][y * width + x]`, the
/// pixels between the rows untouched. Channel `l`'s plane, for 16
/// channels, becomes the interior of a padded plane of 16-lane vectors
/// in one pass (a depthwise layer's input, whose padding stays zero).
///
/// ```
/// use blob_kernels::cpu::{INTERLEAVED_LANES, interleave_rows};
/// // A 2 x 2 plane into rows of 3 pixels: the third pixel of each row
/// // is left as it was.
/// let a = [1.0f32, 2.0, 3.0, 4.0];
/// let mut lanes = vec![-1.0f32; 5 * INTERLEAVED_LANES];
/// interleave_rows(&[&a], (2, 2), 3, &mut lanes);
/// assert_eq!(lanes[3 * INTERLEAVED_LANES], 3.0); // row 1, pixel 0
/// assert_eq!(lanes[2 * INTERLEAVED_LANES], -1.0); // between the rows
/// ```
///
/// # Panics
/// With more than 16 runs, a run shorter than `rows * width`, a
/// `row_stride` below `width`, or `lanes` shorter than the last row's
/// end.
#[track_caller]
pub fn interleave_rows(
    runs: &[&[f32]],
    (rows, width): (usize, usize),
    row_stride: usize,
    lanes: &mut [f32],
) {
    let len = rows * width;
    let reach = if len == 0 {
        0
    } else {
        (rows - 1) * row_stride + width
    };
    assert!(
        row_stride >= width,
        "rows of {width} pixels cannot lie {row_stride} pixels apart"
    );
    check_runs(runs.len(), runs.iter().map(|r| r.len()), len);
    assert!(
        lanes.len() >= reach * INTERLEAVED_LANES,
        "{rows} rows of {width} pixels, {row_stride} apart, of {INTERLEAVED_LANES} lanes need \
         {} values, got {}",
        reach * INTERLEAVED_LANES,
        lanes.len()
    );
    let lanes = &mut lanes[..reach * INTERLEAVED_LANES];
    let place = Rows { width, row_stride };
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: the asserts proved every run holds `len` values and `lanes`
        // reaches the last row's end; the family is there, as `isa` found.
        Isa::Avx512 => return unsafe { x86::interleave_avx512(runs, len, place, lanes) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { x86::interleave_avx2(runs, len, place, lanes) },
        Isa::Baseline => {}
    }
    for x in 0..len {
        let pixel = &mut lanes[place.of(x) * INTERLEAVED_LANES..][..INTERLEAVED_LANES];
        for (l, v) in pixel.iter_mut().enumerate() {
            *v = runs.get(l).map_or(0.0, |run| run[x]);
        }
    }
}

/// Where [`interleave_rows`] puts the pixels of a plane `width` wide:
/// rows `row_stride` pixels apart.
#[derive(Clone, Copy)]
struct Rows {
    width: usize,
    row_stride: usize,
}

impl Rows {
    /// The place of pixel `x`.
    fn of(self, x: usize) -> usize {
        x / self.width * self.row_stride + x % self.width
    }

    /// The first pixel's place, for [`Rows::next`] to walk from.
    #[cfg(target_arch = "x86_64")]
    fn walk(self) -> Walk {
        Walk { at: 0, column: 0 }
    }

    /// Moves `walk` from a pixel's place to the next pixel's, without
    /// a division.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn next(self, walk: &mut Walk) {
        walk.at += 1;
        walk.column += 1;
        if walk.column == self.width {
            walk.column = 0;
            walk.at += self.row_stride - self.width;
        }
    }
}

/// A pixel's place in [`Rows`], and its column.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Walk {
    at: usize,
    column: usize,
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
    check_runs(runs.len(), runs.iter().map(|r| r.len()), len);
    assert!(
        lanes.len() >= len * INTERLEAVED_LANES,
        "{len} values of {INTERLEAVED_LANES} lanes need {} values, got {}",
        len * INTERLEAVED_LANES,
        lanes.len()
    );
    let lanes = &lanes[..len * INTERLEAVED_LANES];
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: the asserts proved every run holds `len` values and `lanes`
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

/// `sums[l]` = the first `len` values of `runs[l]` added one after
/// another from 0.0: the sums a loop over each run makes, bit for bit,
/// with the runs side by side in registers (a global average pool's
/// planes, Caffe's `Pooling` with `global_pooling`). Each block of
/// values is turned side by side in registers and added there, never
/// stored, 16 runs at a time. Laid side
/// by side in memory first ([`interleave_runs`]), SqueezeNet's pool10
/// (1000 planes of 13 x 13) spent two thirds of its time in the copy.
///
/// ```
/// use blob_kernels::cpu::run_sums;
/// let (a, b) = ([1.0f32, 2.0, 3.0], [1e8f32, 1.0, -1e8]);
/// let mut sums = [0.0f32; 2];
/// run_sums(&[&a, &b], 3, &mut sums);
/// // In order: 1e8 + 1 rounds back to 1e8 before -1e8 comes.
/// assert_eq!(sums, [6.0, 0.0]);
/// ```
///
/// # Panics
/// With a run shorter than `len`, or `sums` shorter than `runs`.
#[track_caller]
pub fn run_sums(runs: &[&[f32]], len: usize, sums: &mut [f32]) {
    assert!(
        runs.iter().all(|r| r.len() >= len),
        "every run must hold the {len} values added"
    );
    assert!(
        sums.len() >= runs.len(),
        "{} runs need as many sums, got {}",
        runs.len(),
        sums.len()
    );
    let sums = &mut sums[..runs.len()];
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: the asserts proved every run holds `len` values and
        // `sums` one a run; the family is there, as `isa` found.
        Isa::Avx512 => return unsafe { x86::run_sums_avx512(runs, len, sums) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { x86::run_sums_avx2(runs, len, sums) },
        Isa::Baseline => {}
    }
    for (sum, run) in sums.iter_mut().zip(runs) {
        *sum = run[..len].iter().fold(0.0, |s, &v| s + v);
    }
}

#[track_caller]
fn check_runs(runs: usize, mut lens: impl Iterator<Item = usize>, len: usize) {
    assert!(
        runs <= INTERLEAVED_LANES,
        "{runs} runs cannot lie side by side in {INTERLEAVED_LANES} lanes"
    );
    assert!(
        lens.all(|l| l >= len),
        "every run must hold the {len} values laid side by side"
    );
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::lanes::{Avx2, Lanes, transpose8, transpose16};
    use super::INTERLEAVED_LANES as LANES;
    use super::Rows;

    /// # Safety
    /// AVX-512 F is available; each run holds `len` values, `lanes`
    /// `len * 16`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn interleave_avx512(
        runs: &[&[f32]],
        len: usize,
        place: Rows,
        lanes: &mut [f32],
    ) {
        let mut walk = place.walk();
        for x0 in (0..len).step_by(LANES) {
            let n = (len - x0).min(LANES);
            let mask = ((1u32 << n) - 1) as __mmask16;
            let block: [__m512; LANES] = std::array::from_fn(|l| match runs.get(l) {
                // SAFETY: values x0..x0 + n of the run are inside it; the
                // mask keeps the rest unread.
                Some(run) => unsafe { _mm512_maskz_loadu_ps(mask, run.as_ptr().add(x0)) },
                None => _mm512_setzero_ps(),
            });
            for pixel in transpose16(block).iter().take(n) {
                // SAFETY: pixel x0 + i < len's place holds 16 values of
                // `lanes`.
                unsafe { _mm512_storeu_ps(lanes.as_mut_ptr().add(walk.at * LANES), *pixel) };
                place.next(&mut walk);
            }
        }
    }

    /// [`super::run_sums`] on AVX-512: for 16 runs at a time, a block of
    /// 16 values of each at a time, turned and added in order. Whole
    /// blocks stay in registers; two or four registers of runs at once,
    /// their turned blocks went through the stack, and ran slower.
    ///
    /// # Safety
    /// AVX-512 F is available; each run holds `len` values, `sums` one a
    /// run and no more.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run_sums_avx512(runs: &[&[f32]], len: usize, sums: &mut [f32]) {
        for (set, sums) in runs.chunks(LANES).zip(sums.chunks_mut(LANES)) {
            let mut acc = _mm512_setzero_ps();
            let whole = len / LANES * LANES;
            for x0 in (0..whole).step_by(LANES) {
                let block: [__m512; LANES] = std::array::from_fn(|l| match set.get(l) {
                    // SAFETY: values x0..x0 + 16 of the run are inside it.
                    Some(run) => unsafe { _mm512_loadu_ps(run.as_ptr().add(x0)) },
                    None => _mm512_setzero_ps(),
                });
                for pixel in transpose16(block) {
                    acc = _mm512_add_ps(acc, pixel);
                }
            }
            if whole < len {
                let n = len - whole;
                let mask = ((1u32 << n) - 1) as __mmask16;
                let block: [__m512; LANES] = std::array::from_fn(|l| match set.get(l) {
                    // SAFETY: values whole..len of the run are inside it;
                    // the mask keeps the rest unread.
                    Some(run) => unsafe { _mm512_maskz_loadu_ps(mask, run.as_ptr().add(whole)) },
                    None => _mm512_setzero_ps(),
                });
                for pixel in transpose16(block).into_iter().take(n) {
                    acc = _mm512_add_ps(acc, pixel);
                }
            }
            let mut all = [0.0f32; LANES];
            // SAFETY: `all` holds a register.
            unsafe { _mm512_storeu_ps(all.as_mut_ptr(), acc) };
            sums.copy_from_slice(&all[..sums.len()]);
        }
    }

    /// Registers of 8 runs [`run_sums_avx2`] adds at once: two chains of
    /// additions in flight (four ran no faster).
    const AVX2_CHAINS: usize = 2;

    /// [`super::run_sums`] on AVX2: for 16 runs at a time, a block of 8
    /// values of each at a time, turned and added in order.
    ///
    /// # Safety
    /// AVX2 and FMA are available; each run holds `len` values, `sums`
    /// one a run and no more.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn run_sums_avx2(runs: &[&[f32]], len: usize, sums: &mut [f32]) {
        const N: usize = Avx2::N;
        for (set, sums) in runs
            .chunks(AVX2_CHAINS * N)
            .zip(sums.chunks_mut(AVX2_CHAINS * N))
        {
            let mut acc = [_mm256_setzero_ps(); AVX2_CHAINS];
            let registers = set.len().div_ceil(N);
            for x0 in (0..len).step_by(N) {
                let n = (len - x0).min(N);
                // SAFETY: AVX2 is enabled here.
                let mask = unsafe { Avx2::first(n) };
                let mut turned = [[_mm256_setzero_ps(); N]; AVX2_CHAINS];
                for (r, turned) in turned.iter_mut().enumerate().take(registers) {
                    let block: [__m256; N] = std::array::from_fn(|l| match set.get(r * N + l) {
                        // SAFETY: values x0..x0 + 8 of the run are inside it.
                        Some(run) if n == N => unsafe { _mm256_loadu_ps(run.as_ptr().add(x0)) },
                        // SAFETY: values x0..x0 + n of the run are inside
                        // it; the mask keeps the rest unread.
                        Some(run) => unsafe { Avx2::load_masked(mask, run.as_ptr().add(x0)) },
                        None => _mm256_setzero_ps(),
                    });
                    // SAFETY: AVX2 is enabled here.
                    *turned = unsafe { transpose8(block) };
                }
                for i in 0..n {
                    for (acc, turned) in acc.iter_mut().zip(&turned) {
                        *acc = _mm256_add_ps(*acc, turned[i]);
                    }
                }
            }
            let mut all = [0.0f32; AVX2_CHAINS * N];
            for (r, acc) in acc.into_iter().enumerate() {
                // SAFETY: `all` holds AVX2_CHAINS registers.
                unsafe { _mm256_storeu_ps(all.as_mut_ptr().add(r * N), acc) };
            }
            sums.copy_from_slice(&all[..sums.len()]);
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
    /// reaches the last pixel's place of `place`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn interleave_avx2(
        runs: &[&[f32]],
        len: usize,
        place: Rows,
        lanes: &mut [f32],
    ) {
        let dst = lanes.as_mut_ptr();
        let mut walk = place.walk();
        let mut x0 = 0;
        if runs.len() == LANES {
            // Both halves of each pixel's 16 lanes at once, each pixel a
            // whole cache line written in one pass, with plain loads and
            // stores: half by half, each load a test of its run and mask
            // and each pixel a step of the walk, the copies took twice a
            // 512 x 19 x 19 depthwise layer's multiply-adds.
            let from: [*const f32; LANES] = std::array::from_fn(
                #[inline(always)]
                |l| runs[l].as_ptr(),
            );
            while x0 + Avx2::N <= len {
                let mut turned = [[_mm256_setzero_ps(); 8]; 2];
                for (half, turned) in turned.iter_mut().enumerate() {
                    let mut block = [_mm256_setzero_ps(); 8];
                    for (l, v) in block.iter_mut().enumerate() {
                        // SAFETY: values x0..x0 + 8 of each run are inside it.
                        *v = unsafe { _mm256_loadu_ps(from[half * Avx2::N + l].add(x0)) };
                    }
                    // SAFETY: AVX2 is enabled here.
                    *turned = unsafe { transpose8(block) };
                }
                for (low, high) in turned[0].into_iter().zip(turned[1]) {
                    // SAFETY: each pixel x0 + i < len's place holds 16
                    // values.
                    unsafe {
                        let to = dst.add(walk.at * LANES);
                        _mm256_storeu_ps(to, low);
                        _mm256_storeu_ps(to.add(Avx2::N), high);
                    }
                    place.next(&mut walk);
                }
                x0 += Avx2::N;
            }
        }
        // The rest (fewer runs than lanes, or the ragged end), half by
        // half, masked.
        let start = (x0, walk);
        for half in 0..LANES / Avx2::N {
            let first = half * Avx2::N;
            let (mut x0, mut walk) = (start.0, start.1);
            while x0 < len {
                let n = (len - x0).min(Avx2::N);
                // SAFETY: AVX2 is enabled here.
                let mask = unsafe { Avx2::first(n) };
                let mut block = [_mm256_setzero_ps(); 8];
                for (l, v) in block.iter_mut().enumerate() {
                    if let Some(run) = runs.get(first + l) {
                        // SAFETY: values x0..x0 + n of the run are inside
                        // it; the mask keeps the rest unread.
                        *v = unsafe { Avx2::load_masked(mask, run.as_ptr().add(x0)) };
                    }
                }
                // SAFETY: AVX2 is enabled here.
                let turned = unsafe { transpose8(block) };
                for pixel in turned.iter().take(n) {
                    // SAFETY: pixel x0 + i < len's place holds 16 values,
                    // of which this half's 8 start at `first`.
                    unsafe { _mm256_storeu_ps(dst.add(walk.at * LANES + first), *pixel) };
                    place.next(&mut walk);
                }
                x0 += n;
            }
        }
    }

    /// # Safety
    /// AVX2 and FMA are available; each run holds `len` values, `lanes`
    /// `len * 16`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn deinterleave_avx2(lanes: &[f32], len: usize, runs: &mut [&mut [f32]]) {
        let src = lanes.as_ptr();
        let mut x0 = 0;
        if runs.len() == LANES {
            // Whole blocks of 8 pixels, both halves, plain loads and
            // stores (see `interleave_avx2`).
            let to: [*mut f32; LANES] = std::array::from_fn(
                #[inline(always)]
                |l| runs[l].as_mut_ptr(),
            );
            while x0 + Avx2::N <= len {
                for half in 0..LANES / Avx2::N {
                    let mut block = [_mm256_setzero_ps(); 8];
                    for (i, v) in block.iter_mut().enumerate() {
                        // SAFETY: pixel x0 + i < len holds 16 values.
                        *v = unsafe { _mm256_loadu_ps(src.add((x0 + i) * LANES + half * Avx2::N)) };
                    }
                    // SAFETY: AVX2 is enabled here.
                    let turned = unsafe { transpose8(block) };
                    for (l, values) in turned.into_iter().enumerate() {
                        // SAFETY: values x0..x0 + 8 of each run are inside it.
                        unsafe { _mm256_storeu_ps(to[half * Avx2::N + l].add(x0), values) };
                    }
                }
                x0 += Avx2::N;
            }
        }
        for (half, runs) in runs.chunks_mut(Avx2::N).enumerate() {
            let first = half * Avx2::N;
            let mut x0 = x0;
            while x0 < len {
                let n = (len - x0).min(Avx2::N);
                let mut block = [_mm256_setzero_ps(); 8];
                for (i, v) in block.iter_mut().enumerate().take(n) {
                    // SAFETY: pixel x0 + i < len holds 16 values, of which
                    // this half's 8 start at `first`.
                    *v = unsafe { _mm256_loadu_ps(src.add((x0 + i) * LANES + first)) };
                }
                // SAFETY: AVX2 is enabled here.
                let (turned, mask) = unsafe { (transpose8(block), Avx2::first(n)) };
                for (run, values) in runs.iter_mut().zip(turned) {
                    // SAFETY: values x0..x0 + n of the run are inside it;
                    // the mask keeps the rest unwritten.
                    unsafe { Avx2::store_masked(mask, run.as_mut_ptr().add(x0), values) };
                }
                x0 += n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `interleave_rows` against its definition, on this machine's path:
    /// planes narrower and wider than a register's 16 pixels, ragged
    /// ends, fewer runs than lanes, rows packed and apart; the pixels
    /// between the rows are left as they were.
    #[test]
    fn rows_land_where_the_definition_puts_them() {
        for (rows, width, stride, count) in [
            (19, 19, 21, 16),
            (10, 10, 12, 16),
            (3, 40, 40, 5),
            (1, 7, 7, 16),
            (4, 17, 30, 3),
        ] {
            let runs: Vec<Vec<f32>> = (0..count)
                .map(|l| (0..rows * width).map(|x| (l * 1000 + x) as f32).collect())
                .collect();
            let runs: Vec<&[f32]> = runs.iter().map(Vec::as_slice).collect();
            let len = ((rows - 1) * stride + width) * INTERLEAVED_LANES + 3;
            let mut got = vec![-1.0f32; len];
            interleave_rows(&runs, (rows, width), stride, &mut got);
            let mut want = vec![-1.0f32; len];
            for y in 0..rows {
                for x in 0..width {
                    for l in 0..INTERLEAVED_LANES {
                        want[(y * stride + x) * INTERLEAVED_LANES + l] =
                            runs.get(l).map_or(0.0, |run| run[y * width + x]);
                    }
                }
            }
            assert_eq!(
                got, want,
                "{rows} x {width} rows {stride} apart, {count} runs"
            );
        }
    }

    /// `deinterleave_runs` against its definition: 16 runs and fewer,
    /// lengths of whole blocks of 8 pixels and ragged ones, each run's
    /// values past `len` left as they were.
    #[test]
    fn runs_come_back_as_the_definition_takes_them() {
        for (len, count) in [(361, 16), (100, 16), (8, 16), (7, 16), (16, 9), (19, 3)] {
            let lanes: Vec<f32> = (0..len * INTERLEAVED_LANES).map(|v| v as f32).collect();
            let mut runs = vec![vec![-1.0f32; len + 2]; count];
            let mut views: Vec<&mut [f32]> = runs.iter_mut().map(Vec::as_mut_slice).collect();
            deinterleave_runs(&lanes, len, &mut views);
            for (l, run) in runs.iter().enumerate() {
                let mut want: Vec<f32> =
                    (0..len).map(|x| lanes[x * INTERLEAVED_LANES + l]).collect();
                want.extend([-1.0, -1.0]);
                assert_eq!(run, &want, "{len} pixels, {count} runs, run {l}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "need")]
    fn a_short_destination_is_refused() {
        let run = [0.0f32; 4];
        interleave_rows(&[&run], (2, 2), 3, &mut [0.0; 4 * INTERLEAVED_LANES]);
    }
}
