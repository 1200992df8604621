//! BLAS level 1: axpy, axpby, scal, scale, dot, strided_dot, asum, sum, copy, set.
//!
//! Reductions keep 32 independent accumulators per 4096-element block, so
//! the compiler vectorizes them into enough registers to hide the add
//! latency, and add each block's lanes into 32 `f64` lanes, summed once a
//! group of blocks, which keeps `asum`/`dot` of 10^7 `f32` values within
//! 1e-6 of an exact sum.

#[cfg(target_arch = "x86_64")]
use super::lanes::{Lanes, on_lanes};
use super::{check_len, cores, on_cores, vectorized};
use crate::Real;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};

/// From this many elements a reduction or an element-wise kernel is
/// split across cores: two cores read even a cache-resident vector faster
/// than one, and below this the hand-over costs more than it saves.
const PARALLEL_MIN: usize = 1 << 18;

/// How many parts a kernel over `n` elements is cut into.
fn parts_for(n: usize) -> usize {
    if n < PARALLEL_MIN { 1 } else { cores() }
}

/// Blocks summed one after another into one group's partial sum; the
/// groups' sums are then added in order. The grouping is the same on one
/// core or many, so the result does not depend on the thread count. The
/// cores share whole groups: at 16 blocks a group, 10^6 values made 15.3
/// groups and one core 52% of the work; at 4, 50.8% (`asum` of 10^6 on
/// two Zen 5 cores, 9 alternating runs: 188 -> 196 GB/s; one core level).
const GROUP: usize = 4;

/// Sums over 4096-element blocks of inputs of `bytes` in all:
/// `block(range, lanes, ahead)` adds a block's [`LANES`] partial sums into
/// `lanes` (in f64) and returns the sum of its leftover tail, asking for
/// its lines ahead of its reads where `ahead` ([`PREFETCH_MAX_BYTES`]).
/// Blocks go in groups of [`GROUP`], one vectorized call a group, whose
/// lanes are combined once; the groups are shared across cores for large
/// inputs and their sums added in order.
fn blocked_sum(
    n: usize,
    bytes: usize,
    block: impl Fn(std::ops::Range<usize>, &mut [f64; LANES], bool) -> f64 + Sync,
) -> f64 {
    let ahead = bytes <= PREFETCH_MAX_BYTES;
    let blocks = n.div_ceil(BLOCK);
    let group = |g: usize| -> f64 {
        vectorized(
            #[inline(always)]
            || {
                let mut lanes = [0.0f64; LANES];
                let mut tails = 0.0;
                for b in g * GROUP..((g + 1) * GROUP).min(blocks) {
                    tails += block(b * BLOCK..((b + 1) * BLOCK).min(n), &mut lanes, ahead);
                }
                combine(lanes) + tails
            },
        )
    };
    let groups = blocks.div_ceil(GROUP);
    let parts = parts_for(n);
    if parts == 1 {
        return (0..groups).map(group).sum();
    }
    let mut sums = vec![0.0f64; groups];
    let per_part = groups.div_ceil(parts).max(1);
    on_cores(sums.chunks_mut(per_part).enumerate(), |(p, sums)| {
        for (g, sum) in (p * per_part..).zip(sums) {
            *sum = group(g);
        }
    });
    sums.into_iter().sum()
}

/// Elements per part of an element-wise kernel over `n` elements: all of
/// them below the size worth sharing, else one part a core, in whole
/// cache lines. The level-1 kernels cut their slices so; a loop of the
/// caller's own over several slices (a solver's one-pass step) can cut
/// its slices the same way with `chunks_mut` and hand them to
/// [`on_cores`].
///
/// ```
/// // Too few to share: one part (rounded up to whole cache lines).
/// assert_eq!(blob_kernels::cpu::part_len_for(1000), 1008);
/// assert!(blob_kernels::cpu::part_len_for(10_000_000) % 16 == 0);
/// ```
pub fn part_len_for(n: usize) -> usize {
    n.div_ceil(parts_for(n)).next_multiple_of(16).max(1)
}

/// Runs `f` on matching parts of `y` and `x`, one per core for large ones:
/// each element is computed alone, so the result is the same bit for bit.
fn zip_chunks<T: Real>(y: &mut [T], x: &[T], f: impl Fn(&mut [T], &[T]) + Sync) {
    let len = part_len_for(y.len());
    on_cores(y.chunks_mut(len).zip(x.chunks(len)), |(y, x)| {
        vectorized(
            #[inline(always)]
            || f(y, x),
        )
    });
}

/// Runs `f` on parts of `x`, one per core for large ones.
fn chunks<T: Real>(x: &mut [T], f: impl Fn(&mut [T]) + Sync + Send) {
    let len = part_len_for(x.len());
    on_cores(x.chunks_mut(len), |x| {
        vectorized(
            #[inline(always)]
            || f(x),
        )
    });
}

const LANES: usize = 32;
const BLOCK: usize = 4096;

/// Adds the lanes pairwise (fewer rounding steps than a left fold), once a
/// group of blocks. Kept out of line: inlined, the vectorizer fuses this
/// tree with the loops before it and narrows them to pairs of lanes.
#[inline(never)]
fn combine(lanes: [f64; LANES]) -> f64 {
    let mut v = lanes;
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            v[i] += v[i + width];
        }
    }
    v[0]
}

/// Adds a block's lanes into the group's. Lane by lane, with no work
/// across lanes, so a block ends without leaving its vector registers: a
/// horizontal sum a block (out of line, through memory) cost 5% of a
/// cache-resident `asum`.
#[inline(always)]
fn widen_into<T: Real>(acc: [T; LANES], lanes: &mut [f64; LANES]) {
    // Through memory: seen together, the vectorizer would narrow the
    // block's loop to the widening's 256-bit halves.
    let acc = std::hint::black_box(acc);
    for i in 0..LANES {
        lanes[i] += acc[i].to_f64();
    }
}

/// How far ahead of a reduction's reads it asks for the cache lines it
/// will read: the hardware's own prefetching left `asum` of 10^6 f32 (4
/// MB, in L3) at 98-103 GB/s on a Zen 5 core, 4 KiB ahead 122 (two
/// cores: 199-203 -> 223-228; OpenBLAS 103 / 215), 8 and 16 KiB ahead
/// 115-117.
const PREFETCH_BYTES: usize = 4096;

/// The largest input a reduction reads with [`prefetch_ahead`]: from
/// memory (10^7 f32, 40 MB) the requests cost 7-9% at 4 KiB ahead, as the
/// hardware's prefetching already keeps up there (10^8: level).
const PREFETCH_MAX_BYTES: usize = 8 << 20;

/// Asks for the cache lines of `chunk`'s values `BYTES` on.
#[inline(always)]
pub(super) fn prefetch_ahead<const BYTES: usize, T>(chunk: &[T]) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..size_of_val(chunk)).step_by(64) {
        let at = chunk.as_ptr().cast::<i8>().wrapping_add(BYTES + line);
        // SAFETY: a prefetch reads nothing the program sees and never
        // faults, whatever the address (past the slice's end included).
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at) };
    }
}

/// Asks for the cache line at `chunk`'s start `BYTES` on, into L2 alone:
/// a stream read once from memory, whose lines would crowd L1's misses
/// in flight (a gemv's rows).
#[inline(always)]
pub(super) fn prefetch_to_l2_ahead<const BYTES: usize, T>(chunk: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        let at = chunk.as_ptr().cast::<i8>().wrapping_add(BYTES);
        // SAFETY: a prefetch reads nothing the program sees and never
        // faults, whatever the address (past the slice's end included).
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(at) };
    }
}

/// A block's sum of `f(x)`, reading ahead where `ahead`.
#[inline(always)]
fn block_sum1<T: Real>(x: &[T], lanes: &mut [f64; LANES], ahead: bool, f: impl Fn(T) -> T) -> f64 {
    if ahead {
        block_sum1_reading::<T, true>(x, lanes, f)
    } else {
        block_sum1_reading::<T, false>(x, lanes, f)
    }
}

#[inline(always)]
fn block_sum1_reading<T: Real, const AHEAD: bool>(
    x: &[T],
    lanes: &mut [f64; LANES],
    f: impl Fn(T) -> T,
) -> f64 {
    let (chunks, tail) = x.as_chunks::<LANES>();
    let mut acc = [T::ZERO; LANES];
    for c in chunks {
        if AHEAD {
            prefetch_ahead::<PREFETCH_BYTES, T>(c);
        }
        for i in 0..LANES {
            acc[i] += f(c[i]);
        }
    }
    widen_into(acc, lanes);
    tail.iter().map(|&v| f(v).to_f64()).sum()
}

/// A block's sum of `f(x, y)`, reading ahead where `ahead`.
#[inline(always)]
fn block_sum2<T: Real>(
    (x, y): (&[T], &[T]),
    lanes: &mut [f64; LANES],
    ahead: bool,
    f: impl Fn(T, T) -> T,
) -> f64 {
    if ahead {
        block_sum2_reading::<T, true>(x, y, lanes, f)
    } else {
        block_sum2_reading::<T, false>(x, y, lanes, f)
    }
}

#[inline(always)]
fn block_sum2_reading<T: Real, const AHEAD: bool>(
    x: &[T],
    y: &[T],
    lanes: &mut [f64; LANES],
    f: impl Fn(T, T) -> T,
) -> f64 {
    let (xc, xt) = x.as_chunks::<LANES>();
    let (yc, yt) = y.as_chunks::<LANES>();
    let mut acc = [T::ZERO; LANES];
    for (a, b) in xc.iter().zip(yc) {
        if AHEAD {
            prefetch_ahead::<PREFETCH_BYTES, T>(a);
            prefetch_ahead::<PREFETCH_BYTES, T>(b);
        }
        for i in 0..LANES {
            acc[i] += f(a[i], b[i]);
        }
    }
    widen_into(acc, lanes);
    xt.iter().zip(yt).map(|(&a, &b)| f(a, b).to_f64()).sum()
}

/// Sum of absolute values (Caffe `caffe_cpu_asum`, BLAS `?asum`).
///
/// ```
/// assert_eq!(blob_kernels::cpu::asum(&[1.0f64, -2.5, 0.5]), 4.0);
/// ```
pub fn asum<T: Real>(x: &[T]) -> T {
    T::from_f64(blocked_sum(
        x.len(),
        size_of_val(x),
        #[inline(always)]
        |r, lanes, ahead| block_sum1(&x[r], lanes, ahead, |v| v.abs()),
    ))
}

/// Sum of the values, in a fixed order (what Caffe's bias gradients get
/// from a gemv against a vector of ones). A plain `iter().sum()` adds one
/// value after another and cannot be vectorized; this keeps 32
/// accumulators, as [`asum`] does.
///
/// ```
/// assert_eq!(blob_kernels::cpu::sum(&[1.0f32, -2.5, 0.5]), -1.0);
/// ```
pub fn sum<T: Real>(x: &[T]) -> T {
    T::from_f64(blocked_sum(
        x.len(),
        size_of_val(x),
        #[inline(always)]
        |r, lanes, ahead| block_sum1(&x[r], lanes, ahead, |v| v),
    ))
}

/// Dot product (Caffe `caffe_cpu_dot`, BLAS `?dot`).
///
/// ```
/// assert_eq!(blob_kernels::cpu::dot(&[1.0f32, 2.0, 3.0], &[4.0, 5.0, 6.0]), 32.0);
/// ```
#[track_caller]
pub fn dot<T: Real>(x: &[T], y: &[T]) -> T {
    check_len("dot", "y", y.len(), x.len());
    T::from_f64(blocked_sum(
        x.len(),
        2 * size_of_val(x),
        #[inline(always)]
        |r, lanes, ahead| block_sum2((&x[r.clone()], &y[r]), lanes, ahead, |p, q| p * q),
    ))
}

/// Sum of squares, `dot(x, x)` (what Caffe's `sumsq_data` computes).
///
/// ```
/// assert_eq!(blob_kernels::cpu::sumsq(&[3.0f32, 4.0]), 25.0);
/// ```
pub fn sumsq<T: Real>(x: &[T]) -> T {
    T::from_f64(blocked_sum(
        x.len(),
        size_of_val(x),
        #[inline(always)]
        |r, lanes, ahead| block_sum1(&x[r], lanes, ahead, |v| v * v),
    ))
}

/// Strided dot product of `n` pairs (Caffe `caffe_cpu_strided_dot`):
/// `sum(x[i*incx] * y[i*incy])`.
///
/// ```
/// let x = [1.0f32, 0.0, 2.0, 0.0, 3.0];
/// let y = [1.0f32, 1.0, 1.0];
/// assert_eq!(blob_kernels::cpu::strided_dot(3, &x, 2, &y, 1), 6.0);
/// ```
#[track_caller]
pub fn strided_dot<T: Real>(n: usize, x: &[T], incx: usize, y: &[T], incy: usize) -> T {
    if n == 0 {
        return T::ZERO;
    }
    assert!(
        incx > 0 && incy > 0,
        "strided_dot: strides must be positive (got {incx}, {incy})"
    );
    let need_x = (n - 1) * incx + 1;
    let need_y = (n - 1) * incy + 1;
    assert!(
        x.len() >= need_x && y.len() >= need_y,
        "strided_dot: {n} elements at strides {incx}, {incy} need {need_x} and {need_y} elements, got {} and {}",
        x.len(),
        y.len()
    );
    if incx == 1 && incy == 1 {
        return dot(&x[..n], &y[..n]);
    }
    let total: f64 = x
        .iter()
        .step_by(incx)
        .zip(y.iter().step_by(incy))
        .take(n)
        .map(|(&a, &b)| (a * b).to_f64())
        .sum();
    T::from_f64(total)
}

/// `y += alpha * x` (Caffe `caffe_axpy`).
///
/// ```
/// let mut y = [1.0f32, 1.0];
/// blob_kernels::cpu::axpy(-1.0, &[0.5, 2.0], &mut y);
/// assert_eq!(y, [0.5, -1.0]);
/// ```
#[track_caller]
pub fn axpy<T: Real>(alpha: T, x: &[T], y: &mut [T]) {
    check_len("axpy", "y", y.len(), x.len());
    zip_chunks(
        y,
        x,
        #[inline(always)]
        |y, x| {
            for (yi, &xi) in y.iter_mut().zip(x) {
                *yi += alpha * xi;
            }
        },
    );
}

/// `y = (0 + alpha * x) + beta * z`: the sum of two scaled inputs
/// exactly as Caffe's Eltwise SUM computes it (`caffe_set` of 0, then
/// `caffe_axpy` of each bottom), the same bits in one pass instead of
/// three over `y` (a ResNet-50 residual add reads and writes 3 MB).
///
/// ```
/// let mut y = [9.0f32; 2];
/// blob_kernels::cpu::sum_of_scaled(1.0, &[1.0, -0.0], 2.0, &[0.5, -0.0], &mut y);
/// assert_eq!(y, [2.0, 0.0]);
/// // Caffe's zero fill makes -0 + -0 a +0.
/// assert!(y[1].is_sign_positive());
/// ```
#[track_caller]
pub fn sum_of_scaled<T: Real>(alpha: T, x: &[T], beta: T, z: &[T], y: &mut [T]) {
    sum_of_scaled_then(alpha, x, beta, z, y, |v| v);
}

/// [`sum_of_scaled`] with `then` applied to each sum before it is
/// stored: Caffe's Eltwise SUM and the in-place ReLU after it (ResNet's
/// residual adds) in one pass over `y` rather than two.
///
/// ```
/// let mut y = [9.0f32; 2];
/// blob_kernels::cpu::sum_of_scaled_then(1.0, &[1.0, -3.0], 1.0, &[0.5, 1.0], &mut y, |v| v.max(0.0));
/// assert_eq!(y, [1.5, 0.0]);
/// ```
#[track_caller]
pub fn sum_of_scaled_then<T: Real>(
    alpha: T,
    x: &[T],
    beta: T,
    z: &[T],
    y: &mut [T],
    then: impl Fn(T) -> T + Sync,
) {
    check_len("sum_of_scaled", "x", x.len(), y.len());
    check_len("sum_of_scaled", "z", z.len(), y.len());
    let len = part_len_for(y.len());
    on_cores(
        y.chunks_mut(len).zip(x.chunks(len)).zip(z.chunks(len)),
        |((y, x), z)| {
            vectorized(
                #[inline(always)]
                || {
                    for ((yi, &xi), &zi) in y.iter_mut().zip(x).zip(z) {
                        *yi = then((T::ZERO + alpha * xi) + beta * zi);
                    }
                },
            )
        },
    );
}

/// `y = alpha * x + beta * y` (Caffe `caffe_cpu_axpby`). As in Caffe's
/// fallback (`scal` then `axpy`), `beta == 0` still multiplies, so a NaN in
/// `y` stays NaN.
///
/// ```
/// let mut y = [1.0f64, 2.0];
/// blob_kernels::cpu::axpby(2.0, &[1.0, 1.0], 0.5, &mut y);
/// assert_eq!(y, [2.5, 3.0]);
/// ```
#[track_caller]
pub fn axpby<T: Real>(alpha: T, x: &[T], beta: T, y: &mut [T]) {
    check_len("axpby", "y", y.len(), x.len());
    zip_chunks(
        y,
        x,
        #[inline(always)]
        |y, x| {
            for (yi, &xi) in y.iter_mut().zip(x) {
                *yi = beta * *yi + alpha * xi;
            }
        },
    );
}

/// `x *= alpha` (Caffe `caffe_scal`).
///
/// ```
/// let mut x = [1.0f32, -2.0];
/// blob_kernels::cpu::scal(3.0, &mut x);
/// assert_eq!(x, [3.0, -6.0]);
/// ```
pub fn scal<T: Real>(alpha: T, x: &mut [T]) {
    chunks(
        x,
        #[inline(always)]
        |x| {
            for v in x.iter_mut() {
                *v *= alpha;
            }
        },
    );
}

/// `y = alpha * x` (Caffe `caffe_cpu_scale`).
///
/// ```
/// let mut y = [0.0f32; 2];
/// blob_kernels::cpu::scale(0.5, &[4.0, 8.0], &mut y);
/// assert_eq!(y, [2.0, 4.0]);
/// ```
#[track_caller]
pub fn scale<T: Real>(alpha: T, x: &[T], y: &mut [T]) {
    check_len("scale", "y", y.len(), x.len());
    zip_chunks(
        y,
        x,
        #[inline(always)]
        |y, x| {
            for (yi, &xi) in y.iter_mut().zip(x) {
                *yi = alpha * xi;
            }
        },
    );
}

/// `y = x` (Caffe `caffe_copy`); any `Copy` element, integers included.
///
/// ```
/// let mut y = [0i32; 3];
/// blob_kernels::cpu::copy(&[1, 2, 3], &mut y);
/// assert_eq!(y, [1, 2, 3]);
/// ```
#[track_caller]
pub fn copy<T: Copy>(x: &[T], y: &mut [T]) {
    check_len("copy", "y", y.len(), x.len());
    y.copy_from_slice(x);
}

/// Copies `rows` runs of `len` values, `src_stride` apart in `src`, into
/// runs `dst_stride` apart in `dst`: a 2-D block copy (a convolution's
/// shifted copies of its image, `caffe_copy` a row at a time). On
/// AVX-512 each run moves as whole and masked 16-value registers; a
/// short copy of unknown length otherwise calls `memcpy`, which costs
/// more than the run takes to move.
///
/// ```
/// let src = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
/// let mut dst = [0.0f32; 4];
/// blob_kernels::cpu::copy_rows(&src, 3, &mut dst, 2, [2, 2]);
/// assert_eq!(dst, [1.0, 2.0, 4.0, 5.0]);
/// ```
///
/// # Panics
/// If a run lies outside its slice.
#[track_caller]
pub fn copy_rows(
    src: &[f32],
    src_stride: usize,
    dst: &mut [f32],
    dst_stride: usize,
    [rows, len]: [usize; 2],
) {
    if rows == 0 || len == 0 {
        return;
    }
    let reach = |stride: usize| (rows - 1).saturating_mul(stride).saturating_add(len);
    assert!(
        src.len() >= reach(src_stride) && dst.len() >= reach(dst_stride),
        "copy_rows: {rows} runs of {len} need {} source and {} destination values, got {} and {}",
        reach(src_stride),
        reach(dst_stride),
        src.len(),
        dst.len()
    );
    #[cfg(target_arch = "x86_64")]
    if super::isa() == super::Isa::Avx512 {
        // SAFETY: AVX-512 F is there; the assert put every run inside
        // its slice; `dst` is a unique borrow, so the runs do not overlap.
        unsafe {
            copy_rows_avx512(
                src.as_ptr(),
                src_stride,
                dst.as_mut_ptr(),
                dst_stride,
                [rows, len],
            )
        };
        return;
    }
    for r in 0..rows {
        dst[r * dst_stride..][..len].copy_from_slice(&src[r * src_stride..][..len]);
    }
}

/// # Safety
/// AVX-512 F is available; each of the `rows` runs of `len` values at
/// `src` and `dst`, `src_stride` and `dst_stride` apart, lies in its
/// allocation, and the two do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn copy_rows_avx512(
    src: *const f32,
    src_stride: usize,
    dst: *mut f32,
    dst_stride: usize,
    [rows, len]: [usize; 2],
) {
    use std::arch::x86_64::*;
    // Whole registers of 16, then one of 8 (LeNet's conv2 rows are 8
    // wide: a masked store of them ran at 6 cycles a row), then a masked
    // rest of fewer than 8.
    let whole = len - len % 16;
    let half = len % 16 >= 8;
    let rest = whole + if half { 8 } else { 0 };
    let tail = ((1u32 << (len - rest)) - 1) as __mmask16;
    for r in 0..rows {
        // SAFETY: run r's values 0..len are inside both allocations, per
        // the caller; the mask keeps the rest untouched.
        unsafe {
            let (s, d) = (src.add(r * src_stride), dst.add(r * dst_stride));
            for i in (0..whole).step_by(16) {
                _mm512_storeu_ps(d.add(i), _mm512_loadu_ps(s.add(i)));
            }
            if half {
                _mm256_storeu_ps(d.add(whole), _mm256_loadu_ps(s.add(whole)));
            }
            if tail != 0 {
                let v = _mm512_maskz_loadu_ps(tail, s.add(rest));
                _mm512_mask_storeu_ps(d.add(rest), tail, v);
            }
        }
    }
}

/// `dst[r * dst_stride + i] = src[r * src_stride + i * step]` for each
/// of `rows` runs of `len` values: a convolution's shifted copies of its
/// image through a strided window (the first layers of CaffeNet,
/// GoogLeNet, ResNet, SqueezeNet and MobileNet read every second or
/// fourth input column). On AVX-512 and AVX2, steps 1, 2 and 4 move a
/// register of values at a time (picked out of two or four registers);
/// other steps go value by value. One call takes all the runs: called a
/// run at a time, MobileNet-SSD's conv0 (2,700 runs of 150 values) spent
/// a fifth of its time there on AVX2, much of it in each call's checks.
///
/// ```
/// let src = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
/// let mut dst = [0.0f32; 4];
/// // Two runs of two values, every third value, from src[0] and src[1].
/// blob_kernels::cpu::copy_strided_rows(&src, 1, 3, &mut dst, 2, [2, 2]);
/// assert_eq!(dst, [0.0, 3.0, 1.0, 4.0]);
/// ```
///
/// # Panics
/// If `step` is 0 or a run lies outside its slice.
#[track_caller]
pub fn copy_strided_rows(
    src: &[f32],
    src_stride: usize,
    step: usize,
    dst: &mut [f32],
    dst_stride: usize,
    [rows, len]: [usize; 2],
) {
    if rows == 0 || len == 0 {
        return;
    }
    assert!(step > 0, "copy_strided_rows: the step is 0");
    let src_reach = ((rows - 1).saturating_mul(src_stride))
        .saturating_add((len - 1).saturating_mul(step))
        .saturating_add(1);
    let dst_reach = ((rows - 1).saturating_mul(dst_stride)).saturating_add(len);
    assert!(
        src_reach <= src.len() && dst_reach <= dst.len(),
        "copy_strided_rows: {rows} runs of {len} values {step} apart need {src_reach} source and \
         {dst_reach} destination values, got {} and {}",
        src.len(),
        dst.len()
    );
    #[cfg(target_arch = "x86_64")]
    if matches!(step, 1 | 2 | 4)
        // SAFETY: the assert put every run inside its slice, and every
        // value the kernel reads is at or before its run's last.
        && on_lanes!(|L| unsafe {
            match step {
                1 => copy_strided_lanes::<L, 1>(src, src_stride, dst, dst_stride, [rows, len]),
                2 => copy_strided_lanes::<L, 2>(src, src_stride, dst, dst_stride, [rows, len]),
                _ => copy_strided_lanes::<L, 4>(src, src_stride, dst, dst_stride, [rows, len]),
            }
        })
        .is_some()
    {
        return;
    }
    for r in 0..rows {
        let run = &mut dst[r * dst_stride..][..len];
        for (d, s) in run
            .iter_mut()
            .zip(src[r * src_stride..].iter().step_by(step))
        {
            *d = *s;
        }
    }
}

/// How many rows on [`copy_strided_lanes`] asks for the rows it will
/// copy. MobileNet-SSD's conv0 reads its image (1 MB, from memory in the
/// net) through 18 such copies: behind a layer that flushes L3, one Zen 5
/// core, AVX2, medians of 3 alternating runs, 0.445 -> 0.42 ms (one row
/// ahead 0.43); in the net (medians of 5) 0.484 -> 0.440, the pass 19.90
/// -> 19.72. AVX-512, whose loads take whole lines, ran level.
#[cfg(target_arch = "x86_64")]
const COPY_ROWS_AHEAD: usize = 4;

/// [`copy_strided_rows`] for steps 1, 2 and 4 in registers of `L`: `N`
/// values picked from the `N * STEP` that follow their first (the even
/// lanes of two registers, or of two such picks), loaded under masks that
/// stop at `src`'s end. On AVX2, copied value by value, the rows
/// of MobileNet-SSD's conv0 took a quarter of that layer.
///
/// # Safety
/// `L`'s instructions are enabled; each of the `rows` runs lies inside
/// its slice, as [`copy_strided_rows`] asserts.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy_strided_lanes<L: Lanes, const STEP: usize>(
    src: &[f32],
    src_stride: usize,
    dst: &mut [f32],
    dst_stride: usize,
    [rows, len]: [usize; 2],
) {
    /// The register at `at` of `run`, its values past the run's end zero.
    ///
    /// # Safety
    /// `L`'s instructions are enabled.
    #[inline(always)]
    unsafe fn load<L: Lanes>(run: &[f32], at: usize) -> L::V {
        // SAFETY: `L` is enabled (caller); the load keeps to values
        // at..run.len(), whole or under the mask.
        unsafe {
            if at + L::N <= run.len() {
                return L::load(run.as_ptr().add(at));
            }
            let left = L::first(run.len().saturating_sub(at));
            L::load_masked_or(left, L::zero(), run.as_ptr().wrapping_add(at))
        }
    }
    for r in 0..rows {
        // Loads may read past the run's last value up to `src`'s end
        // (values no lane keeps); masks stop them there.
        let run = &src[r * src_stride..];
        // The rows a few on, asked for now: a net's input comes from
        // memory, and AVX2's half-line loads kept too few of its lines
        // in flight.
        let ahead = src
            .as_ptr()
            .wrapping_add((r + COPY_ROWS_AHEAD) * src_stride);
        for line in (0..len * STEP).step_by(16) {
            // SAFETY: a prefetch reads nothing the program sees and never
            // faults, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(ahead.wrapping_add(line).cast::<i8>()) };
        }
        let out = &mut dst[r * dst_stride..][..len];
        let load = |at: usize| -> L::V {
            // SAFETY: `L` is enabled (caller).
            unsafe { load::<L>(run, at) }
        };
        for (i, out) in out.chunks_mut(L::N).enumerate() {
            let at = i * L::N * STEP;
            // SAFETY: `L` is enabled (caller).
            let picked = unsafe {
                match STEP {
                    1 => load(at),
                    2 => L::even(load(at), load(at + L::N)),
                    _ => L::even(
                        L::even(load(at), load(at + L::N)),
                        L::even(load(at + 2 * L::N), load(at + 3 * L::N)),
                    ),
                }
            };
            // SAFETY: the store keeps to `out`'s values, whole or masked.
            unsafe {
                if out.len() == L::N {
                    L::store(out.as_mut_ptr(), picked);
                } else {
                    L::store_masked(L::first(out.len()), out.as_mut_ptr(), picked);
                }
            }
        }
    }
}

/// `dst = src^T`: `src` of `rows x cols`, row-major, into `dst` of `cols
/// x rows`, any `Copy` element. For `f32` on AVX-512, 16 x 16 blocks move
/// through registers.
///
/// ```
/// let src = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2 x 3
/// let mut dst = [0.0f32; 6];
/// blob_kernels::cpu::transpose(&src, [2, 3], &mut dst);
/// assert_eq!(dst, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
/// ```
///
/// # Panics
/// If `src` or `dst` is shorter than `rows * cols`.
#[track_caller]
pub fn transpose<T: Copy + 'static>(src: &[T], [rows, cols]: [usize; 2], dst: &mut [T]) {
    let len = rows * cols;
    assert!(
        src.len() >= len && dst.len() >= len,
        "transpose: a {rows} x {cols} matrix needs {len} values each side, got {} and {}",
        src.len(),
        dst.len()
    );
    #[cfg(target_arch = "x86_64")]
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        && super::isa() == super::Isa::Avx512
    {
        // SAFETY: T is f32, so both pointers are to f32; AVX-512 F is
        // there; the assert put both matrices inside their slices, and
        // `dst` is a unique borrow.
        unsafe { transpose_avx512(src.as_ptr().cast(), [rows, cols], dst.as_mut_ptr().cast()) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        && super::isa() == super::Isa::Avx2
    {
        // SAFETY: as above, with AVX2 and FMA there.
        unsafe { transpose_avx2(src.as_ptr().cast(), [rows, cols], dst.as_mut_ptr().cast()) };
        return;
    }
    for (i, row) in src[..len].chunks_exact(cols.max(1)).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            dst[j * rows + i] = v;
        }
    }
}

/// # Safety
/// AVX-512 F is available; `src` and `dst` each hold `rows * cols`
/// values, and do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose_avx512(src: *const f32, [rows, cols]: [usize; 2], dst: *mut f32) {
    use std::arch::x86_64::*;
    let lanes = |n: usize| ((1u32 << n.min(16)) - 1) as __mmask16;
    for i0 in (0..rows).step_by(16) {
        let down = lanes(rows - i0);
        for j0 in (0..cols).step_by(16) {
            let across = lanes(cols - j0);
            let block: [__m512; 16] = std::array::from_fn(|ii| {
                if i0 + ii < rows {
                    // SAFETY: row i0 + ii, columns j0.. of src, the mask
                    // keeping those past `cols` unread.
                    unsafe { _mm512_maskz_loadu_ps(across, src.add((i0 + ii) * cols + j0)) }
                } else {
                    _mm512_setzero_ps()
                }
            });
            let turned = super::lanes::transpose16(block);
            for (jj, row) in turned.iter().enumerate().take(cols - j0) {
                // SAFETY: row j0 + jj < cols of dst, columns i0.. of it,
                // the mask keeping those past `rows` unwritten.
                unsafe { _mm512_mask_storeu_ps(dst.add((j0 + jj) * rows + i0), down, *row) };
            }
        }
    }
}

/// [`transpose`] in 8 x 8 blocks through AVX2 registers: C's panels in
/// the transposed gemm (SqueezeNet's conv10 spent 5% of its time
/// moving them value by value).
///
/// # Safety
/// AVX2 and FMA are available; `src` and `dst` each hold `rows * cols`
/// values, and do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn transpose_avx2(src: *const f32, [rows, cols]: [usize; 2], dst: *mut f32) {
    use super::lanes::Avx2;
    for i0 in (0..rows).step_by(Avx2::N) {
        // SAFETY: AVX2 is enabled.
        let down = unsafe { Avx2::first(rows - i0) };
        for j0 in (0..cols).step_by(Avx2::N) {
            // SAFETY: as above.
            let (across, zero) = unsafe { (Avx2::first(cols - j0), Avx2::zero()) };
            let block = std::array::from_fn(|ii| {
                if i0 + ii < rows {
                    // SAFETY: row i0 + ii, columns j0.. of src, the mask
                    // keeping those past `cols` unread.
                    unsafe { Avx2::load_masked_or(across, zero, src.add((i0 + ii) * cols + j0)) }
                } else {
                    zero
                }
            });
            // SAFETY: AVX2 is enabled.
            let turned = unsafe { super::lanes::transpose8(block) };
            for (jj, row) in turned.iter().enumerate().take(cols - j0) {
                // SAFETY: row j0 + jj < cols of dst, columns i0.. of it,
                // the mask keeping those past `rows` unwritten.
                unsafe { Avx2::store_masked(down, dst.add((j0 + jj) * rows + i0), *row) };
            }
        }
    }
}

/// `y[i] = f(x[i])` for an element-wise `f` (an activation: Caffe's
/// `ReLU`, `Sigmoid`, `TanH` forward), vectorized, and on every core for
/// large slices; each element is computed alone, so the bits do not
/// depend on the core count.
///
/// ```
/// let x = [-1.0f32, 2.0];
/// let mut y = [0.0f32; 2];
/// blob_kernels::cpu::map(&x, &mut y, |v| if v > 0.0 { v } else { 0.0 });
/// assert_eq!(y, [0.0, 2.0]);
/// ```
#[track_caller]
pub fn map<T: Real>(x: &[T], y: &mut [T], f: impl Fn(T) -> T + Sync) {
    check_len("map", "y", y.len(), x.len());
    zip_chunks(
        y,
        x,
        #[inline(always)]
        |y, x| {
            for (y, &x) in y.iter_mut().zip(x) {
                *y = f(x);
            }
        },
    );
}

/// [`map`] in place: `x[i] = f(x[i])`.
///
/// ```
/// let mut x = [-1.0f32, 2.0];
/// blob_kernels::cpu::map_in_place(&mut x, |v| 2.0 * v);
/// assert_eq!(x, [-2.0, 4.0]);
/// ```
pub fn map_in_place<T: Real>(x: &mut [T], f: impl Fn(T) -> T + Sync) {
    chunks(
        x,
        #[inline(always)]
        |x| map_whole_in_place(x, &f),
    );
}

/// `x[i] = f(x[i])` on the calling core, every value stored whatever `f`
/// returns. Written as a plain loop, an `f` that gives back its input on
/// some values (ReLU's positives, a max) lets the compiler store only the
/// others, through AVX2's masked stores, which AMD's cores run an order
/// of magnitude slower than whole ones (MTCNN O-Net's PReLU on 32 x 46 x
/// 46: 0.004 ms on AVX-512, 0.030 on AVX2); a block computed apart and
/// stored whole keeps them plain.
///
/// ```
/// let mut x = [-1.0f32, 2.0];
/// blob_kernels::cpu::map_whole_in_place(&mut x, |v| if v > 0.0 { v } else { 0.0 });
/// assert_eq!(x, [0.0, 2.0]);
/// ```
#[inline(always)]
pub fn map_whole_in_place<T: Copy>(x: &mut [T], f: impl Fn(T) -> T) {
    let tail = map_whole_blocks::<T, WHOLE_STORES>(x, &f);
    let tail = map_whole_blocks::<T, TAIL_STORES>(tail, &f);
    for v in tail {
        *std::hint::black_box(&mut *v) = f(*v);
    }
}

/// [`map_whole_in_place`] over the whole blocks of `N` values of `x`;
/// the values past the last block are left, and returned.
#[inline(always)]
fn map_whole_blocks<T: Copy, const N: usize>(x: &mut [T], f: impl Fn(T) -> T) -> &mut [T] {
    let (blocks, tail) = x.as_chunks_mut::<N>();
    for block in blocks {
        let mut values = *block;
        for v in &mut values {
            *v = f(*v);
        }
        *std::hint::black_box(block) = values;
    }
    tail
}

/// `x[i] = f(x[i], y[i])` over the shorter of the two, every value of `x`
/// stored, as [`map_whole_in_place`] (a running maximum: pooling's).
///
/// ```
/// let mut m = [1.0f32, 5.0];
/// blob_kernels::cpu::zip_whole_in_place(&mut m, &[3.0, 4.0], |a, b| if b > a { b } else { a });
/// assert_eq!(m, [3.0, 5.0]);
/// ```
#[inline(always)]
pub fn zip_whole_in_place<T: Copy>(x: &mut [T], y: &[T], f: impl Fn(T, T) -> T) {
    let len = x.len().min(y.len());
    let (x, y) = zip_whole_blocks::<T, WHOLE_STORES>(&mut x[..len], &y[..len], &f);
    let (x, y) = zip_whole_blocks::<T, TAIL_STORES>(x, y, &f);
    for (v, &o) in x.iter_mut().zip(y) {
        *std::hint::black_box(&mut *v) = f(*v, o);
    }
}

/// [`zip_whole_in_place`] over the whole blocks of `N` values of `x` (as
/// long as `y`); the values of both past the last block are returned.
#[inline(always)]
fn zip_whole_blocks<'a, 'b, T: Copy, const N: usize>(
    x: &'a mut [T],
    y: &'b [T],
    f: impl Fn(T, T) -> T,
) -> (&'a mut [T], &'b [T]) {
    let (blocks, tail) = x.as_chunks_mut::<N>();
    let (others, other_tail) = y.as_chunks::<N>();
    for (block, other) in blocks.iter_mut().zip(others) {
        let mut values = *block;
        for (v, &o) in values.iter_mut().zip(other) {
            *v = f(*v, o);
        }
        *std::hint::black_box(block) = values;
    }
    (tail, other_tail)
}

/// Values [`map_whole_in_place`] computes before storing them. The
/// store goes through [`std::hint::black_box`]: to the compiler the
/// block may have changed since it was read, so no value can be left
/// unstored.
const WHOLE_STORES: usize = 64;
/// The blocks the values past the last of [`WHOLE_STORES`] go in: one
/// AVX2 register of f32. Stored one at a time through
/// [`std::hint::black_box`], the 57 values past a 441-pixel plane's
/// blocks took most of a PReLU's time on MTCNN O-Net's conv2 output.
const TAIL_STORES: usize = 8;

/// `y[i] = alpha` (Caffe `caffe_set`); any `Copy` element, integers included.
///
/// ```
/// let mut y = [0u32; 3];
/// blob_kernels::cpu::set(7, &mut y);
/// assert_eq!(y, [7, 7, 7]);
/// ```
pub fn set<T: Copy>(alpha: T, y: &mut [T]) {
    y.fill(alpha);
}
