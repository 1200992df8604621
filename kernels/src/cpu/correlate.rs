//! Shallow correlations (a net's first convolution: LeNet's 1 x 5 x 5,
//! MTCNN's 3 x 3 x 3 patches) and their weight gradients, on AVX-512 and
//! AVX2 + FMA, without im2col.
//!
//! im2col copies each input value once per tap into a column buffer 25
//! times the image (LeNet's conv1), and for so shallow a product that
//! copy costs as much as the multiply-adds. Here the caller lays its
//! input out once so that output `t`, counted along the output plane,
//! reads tap `p` at `t + offsets[p]`: for a 2-D window at stride 1, one
//! copy of the image per kernel column, shifted by that column and cut
//! to the output's width (5 copies of the image for LeNet's conv1, not
//! 25). Every tap of a register of adjacent outputs is then one
//! unaligned load, no
//! output is computed and thrown away, and each vector of outputs is
//! stored whole.
//!
//! [`correlate`] sums each output over the taps in their order with one
//! fused multiply-add a tap, the weight broadcast as the gemm kernel
//! broadcasts A, and adds the bias to the sum: the same operations in
//! the same order as im2col, `cpu::gemm` on the same machine (for a patch of up
//! to 256 values, and more than one channel and one output, which
//! `cpu::gemm` takes as a matrix-vector product) and a bias pass, so
//! both give the same bits; the rectifier a net folds into the layer
//! (Caffe's `ReLU`, `ReLU6`) is applied as each value is stored, as the
//! gemm's own stores apply it, rather than in a pass of its own over an
//! output that has left the cache (MobileNet-SSD's conv0 writes 2.9 MB).
//! [`correlate_gradient`] is the weight gradient of the same layout:
//! each weight's gradient a dot product of an output gradient plane with
//! the input at the tap's offset, over every image.

#[cfg(target_arch = "x86_64")]
use super::finish::finished;
#[cfg(target_arch = "x86_64")]
use super::lanes::{Avx2, Avx512, Lanes};
use super::{Isa, Rectifier, isa};

/// Where a correlation reads: output `t` (for `t < len`) reads tap `p`
/// at `t + offsets[p]` of its input.
///
/// A 2-D window at stride 1 is laid out so: one copy of the (padded)
/// image per channel and kernel column `j`, each row of it cut to the
/// output's width `ow` from column `j * dilation`; output `(r, q)` is
/// `t = r * ow + q`, and tap `(c, i, j)` reads copy `(c, j)` from row
/// `i * dilation`. That is `kw` copies of the image where im2col makes
/// `kh * kw`.
///
/// ```
/// use blob_kernels::cpu::Taps;
/// // A 1 x 2 window over rows of 3 outputs laid out as two shifted
/// // copies of the image (each 3 wide, 2 rows): the second copy starts
/// // 6 values in.
/// let taps = Taps { offsets: &[0, 6], len: 6 };
/// assert_eq!(taps.reach(), 12);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taps<'a> {
    /// Each tap's offset into the input, in the weights' order.
    pub offsets: &'a [usize],
    /// Outputs per channel.
    pub len: usize,
}

impl Taps<'_> {
    /// The input values an image's outputs read: up to the last output
    /// at the largest offset (0 without outputs).
    pub fn reach(&self) -> usize {
        if self.len == 0 {
            return 0;
        }
        self.len + self.offsets.iter().max().copied().unwrap_or(0)
    }
}

/// `out[c][t] = rectifier(bias[c] + sum over taps p of weight[c][p] *
/// input[t + offsets[p]])` for each channel `c < out.len()` and `t <
/// len`, on AVX-512
/// or AVX2 (Caffe's convolution, read from an input laid out as
/// [`Taps`] describes, as im2col and gemm compute it, and the `ReLU` a
/// net folds into it). `weight` holds a row of `offsets.len()` values a
/// channel, `out` a run of at least `len` outputs a channel: its whole
/// plane, or the band of the plane's rows one core takes. Says whether
/// it ran (`false`: neither AVX-512 nor AVX2, and nothing was written).
///
/// ```
/// use blob_kernels::cpu::{Rectifier, Taps, correlate};
/// // Rows of 3 outputs, 2 rows, a 1 x 2 window [1, 10] and a bias of
/// // 0.5: the image [[1 2 3 4] [5 6 7 8]] as its two shifted copies.
/// let input = [1.0f32, 2.0, 3.0, 5.0, 6.0, 7.0, 2.0, 3.0, 4.0, 6.0, 7.0, 8.0];
/// let taps = Taps { offsets: &[0, 6], len: 6 };
/// let mut out = [0.0f32; 6];
/// if correlate(&input, taps, &[1.0, 10.0], &[0.5], Rectifier::None, &mut [&mut out]) {
///     assert_eq!(out, [21.5, 32.5, 43.5, 65.5, 76.5, 87.5]);
/// }
/// // With a bias of -40 and Caffe's ReLU folded in.
/// if correlate(&input, taps, &[1.0, 10.0], &[-40.0], Rectifier::Relu, &mut [&mut out]) {
///     assert_eq!(out, [0.0, 0.0, 3.0, 25.0, 36.0, 47.0]);
/// }
/// ```
///
/// # Panics
/// If `input` is shorter than [`Taps::reach`], `weight` or `bias`
/// shorter than the channels need, or a run of `out` shorter than `len`.
pub fn correlate(
    input: &[f32],
    taps: Taps<'_>,
    weight: &[f32],
    bias: &[f32],
    rectifier: Rectifier,
    out: &mut [&mut [f32]],
) -> bool {
    if isa() < Isa::Avx2 {
        return false;
    }
    let Taps { offsets, len } = taps;
    let count = offsets.len();
    let channels = out.len();
    if channels == 0 || len == 0 {
        return true;
    }
    assert!(
        input.len() >= taps.reach(),
        "correlate: {len} outputs reaching {} read {} values, the input has {}",
        taps.reach() - len,
        taps.reach(),
        input.len()
    );
    let shortest = out.iter().map(|run| run.len()).min().unwrap_or(len);
    assert!(
        weight.len() >= channels * count && bias.len() >= channels && shortest >= len,
        "correlate: {channels} channels of {count} taps and {len} outputs need {} weights, {channels} biases and {len} outputs a channel, got {}, {} and {shortest}",
        channels * count,
        weight.len(),
        bias.len(),
    );
    #[cfg(not(target_arch = "x86_64"))]
    return false;
    // SAFETY: `isa` found one of the families; the asserts above prove
    // every read (outputs below `len`, each at an offset, the last step
    // masked to them) and every write (channels below `channels`,
    // outputs below `len`) inside the slices.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        if isa() == Isa::Avx512 {
            Avx512::correlate(input, taps, (weight, bias, rectifier), out)
        } else {
            Avx2::correlate(input, taps, (weight, bias, rectifier), out)
        }
    };
    #[cfg(target_arch = "x86_64")]
    true
}

/// [`correlate`]'s weights, biases and rectifier.
#[cfg(target_arch = "x86_64")]
type Finishing<'a> = (&'a [f32], &'a [f32], Rectifier);

/// Outputs of a plane that every block of channels takes before the
/// next outputs: the taps of 1,024 outputs (a 3 x 3 x 3 window at
/// stride 2 over 150-wide rows reads 18 copies, 80 KiB of them) stay in
/// L2 while each block passes over them, where plane by plane each block
/// read all of an image's copies again. MobileNet-SSD's conv0 (32
/// channels in blocks of 8, 150 x 150 outputs): 0.59 -> 0.54 ms alone,
/// 0.87 -> 0.83 in the net (one core, AVX-512, 2026-12-02); chunks of
/// 256 to 4,096 ran within 0.03 ms of it.
#[cfg(target_arch = "x86_64")]
const CHUNK_OUTPUTS: usize = 1024;

/// A family's copies of [`steps`] and [`gradient_tiles`], each compiled
/// for it.
#[cfg(target_arch = "x86_64")]
trait Correlations: Lanes {
    /// [`steps`] with as many channels a step as the gemm kernel takes
    /// rows a tile.
    ///
    /// # Safety
    /// As [`steps`], the family's instructions available.
    unsafe fn correlate(
        input: &[f32],
        taps: Taps<'_>,
        finish: Finishing<'_>,
        out: &mut [&mut [f32]],
    );

    /// [`gradient_tiles`] with the tile width that leaves the fewest
    /// taps of the last one unused.
    ///
    /// # Safety
    /// As [`gradient_tiles`], the family's instructions available.
    unsafe fn gradient(
        input: &[f32],
        input_stride: usize,
        taps: Taps<'_>,
        dy_images: (&[f32], usize),
        channels: usize,
        dw: &mut [f32],
    );
}

/// Implements [`Correlations`] for a family: `$features` enabled in each
/// copy, `$rows` the gemm kernel's three tile heights, `$grows` the
/// channels of a gradient tile.
#[cfg(target_arch = "x86_64")]
macro_rules! correlations {
    ($lanes:ty, $features:literal, [$r0:literal, $r1:literal, $r2:literal], $grows:literal) => {
        impl Correlations for $lanes {
            unsafe fn correlate(
                input: &[f32],
                taps: Taps<'_>,
                finish: Finishing<'_>,
                out: &mut [&mut [f32]],
            ) {
                #[target_feature(enable = $features)]
                unsafe fn run<const ROWS: usize>(
                    input: &[f32],
                    taps: Taps<'_>,
                    finish: Finishing<'_>,
                    out: &mut [&mut [f32]],
                ) {
                    // SAFETY: the caller's, and the features are enabled.
                    unsafe { steps::<$lanes, ROWS>(input, taps, finish, out) }
                }
                // SAFETY: the caller's.
                unsafe {
                    match super::sgemm::rows_per_tile::<$lanes>(out.len()) {
                        $r1 => run::<$r1>(input, taps, finish, out),
                        $r2 => run::<$r2>(input, taps, finish, out),
                        _ => run::<$r0>(input, taps, finish, out),
                    }
                }
            }

            unsafe fn gradient(
                input: &[f32],
                input_stride: usize,
                taps: Taps<'_>,
                dy_images: (&[f32], usize),
                channels: usize,
                dw: &mut [f32],
            ) {
                #[target_feature(enable = $features)]
                unsafe fn run<const COLS: usize>(
                    input: &[f32],
                    input_stride: usize,
                    taps: Taps<'_>,
                    dy_images: (&[f32], usize),
                    channels: usize,
                    dw: &mut [f32],
                ) {
                    // SAFETY: the caller's, and the features are enabled.
                    unsafe {
                        gradient_tiles::<$lanes, $grows, COLS>(
                            input,
                            input_stride,
                            taps,
                            dy_images,
                            channels,
                            dw,
                        )
                    }
                }
                let count = taps.offsets.len();
                // SAFETY: the caller's.
                unsafe {
                    if count.next_multiple_of(5) < count.next_multiple_of(4) {
                        run::<5>(input, input_stride, taps, dy_images, channels, dw)
                    } else {
                        run::<4>(input, input_stride, taps, dy_images, channels, dw)
                    }
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
correlations!(Avx512, "avx512f", [8, 10, 12], 4);
#[cfg(target_arch = "x86_64")]
correlations!(Avx2, "avx2,fma", [4, 5, 6], 2);

#[cfg(target_arch = "x86_64")]
/// [`correlate`] with `ROWS` channels a step (channels past the last are
/// computed from its weights and not written), two registers of outputs
/// a step.
///
/// # Safety
/// `L`'s instructions are enabled, and the slices are as [`correlate`]
/// checks.
#[inline(always)]
unsafe fn steps<L: Lanes, const ROWS: usize>(
    input: &[f32],
    Taps { offsets, len }: Taps<'_>,
    (weight, bias, rectifier): Finishing<'_>,
    out: &mut [&mut [f32]],
) {
    let channels = out.len();
    // Each run's pointer taken once: its slice is not borrowed again
    // while the pointer writes.
    let runs: Vec<*mut f32> = out.iter_mut().map(|run| run.as_mut_ptr()).collect();
    let span = 2 * L::N;
    let chunk = CHUNK_OUTPUTS.next_multiple_of(span);
    for t1 in (0..len).step_by(chunk) {
        for c0 in (0..channels).step_by(ROWS) {
            let last = channels - 1;
            let taps = offsets.len();
            let rows: [&[f32]; ROWS] =
                std::array::from_fn(|r| &weight[(c0 + r).min(last) * taps..][..taps]);
            // Splat only as each sum is stored: ROWS registers of bias held
            // through the taps would not leave AVX2's 16 for the sums.
            let bias: [f32; ROWS] = std::array::from_fn(|r| bias[(c0 + r).min(last)]);
            let live = (channels - c0).min(ROWS);
            let planes: [*mut f32; ROWS] = std::array::from_fn(|r| runs[(c0 + r).min(last)]);
            for t0 in (t1..len.min(t1 + chunk)).step_by(span) {
                // The lanes of each register below `len`: all of them but in
                // the last step.
                // SAFETY: as above.
                let masks = unsafe {
                    [
                        L::first(len - t0),
                        L::first((len - t0).saturating_sub(L::N)),
                    ]
                };
                let whole = L::whole(masks[0]) && L::whole(masks[1]);
                let at = (
                    input,
                    offsets,
                    &rows,
                    (&bias, rectifier),
                    live,
                    (t0, len),
                    masks,
                    planes,
                );
                // SAFETY: the masks keep the outputs below `len`; a step of
                // whole registers needs none.
                unsafe {
                    if whole {
                        step::<L, ROWS, true>(at)
                    } else {
                        step::<L, ROWS, false>(at)
                    }
                };
            }
        }
    }
}

/// [`step`]'s arguments: the input, the taps' offsets, the weight rows,
/// their biases and the rectifier, the live channels, the first output
/// and the plane's length, the masks and each channel's run of outputs.
#[cfg(target_arch = "x86_64")]
type Step<'a, L, const ROWS: usize> = (
    &'a [f32],
    &'a [usize],
    &'a [&'a [f32]; ROWS],
    (&'a [f32; ROWS], Rectifier),
    usize,
    (usize, usize),
    [<L as Lanes>::M; 2],
    [*mut f32; ROWS],
);

#[cfg(target_arch = "x86_64")]
/// Outputs `t0..t0 + 2 N` (the lanes `masks` keep, low register first,
/// or every lane with `WHOLE`) of the `live` channels whose weight rows
/// are `rows`, into their runs of `len` at `planes`.
///
/// # Safety
/// `L`'s instructions are enabled; each kept output reads inside `input`
/// at every offset and is written inside `out`.
#[inline(always)]
unsafe fn step<L: Lanes, const ROWS: usize, const WHOLE: bool>(
    (input, offsets, rows, (bias, rectifier), live, (t0, len), masks, planes): Step<'_, L, ROWS>,
) {
    if WHOLE {
        // The planes' lines a few steps on, asked for as writes, as the
        // gemm's tiles ask for theirs: MobileNet-SSD's conv0 writes 2.9 MB
        // into memory last written a pass ago.
        for plane in planes {
            // SAFETY: a prefetch reads nothing; the instructions are enabled.
            unsafe { super::sgemm::ask_for_c_ahead::<L, 1, 2>(plane.wrapping_add(t0), 0) };
        }
    }
    // SAFETY: `L`'s instructions are enabled, per the caller.
    let mut acc = [[unsafe { L::zero() }; 2]; ROWS];
    for (p, &offset) in offsets.iter().enumerate() {
        let at = input.as_ptr().wrapping_add(t0 + offset);
        // SAFETY: the kept lanes are inside `input`, per the caller.
        let (lo, hi) = unsafe {
            if WHOLE {
                (L::load(at), L::load(at.add(L::N)))
            } else {
                (
                    L::load_masked(masks[0], at),
                    L::load_masked(masks[1], at.wrapping_add(L::N)),
                )
            }
        };
        for (acc, row) in acc.iter_mut().zip(rows) {
            // SAFETY: p < taps, the row's length.
            let w = unsafe { L::splat(*row.get_unchecked(p)) };
            // SAFETY: as above.
            unsafe {
                acc[0] = L::fmadd(w, lo, acc[0]);
                acc[1] = L::fmadd(w, hi, acc[1]);
            }
        }
    }
    for (r, (acc, b)) in acc.iter().zip(bias).enumerate().take(live) {
        let at = planes[r].wrapping_add(t0);
        for half in 0..2 {
            let to = at.wrapping_add(L::N * half);
            // SAFETY: the kept lanes are outputs of a live channel.
            unsafe {
                let v = finished::<L>(acc[half], L::splat(*b), rectifier);
                if WHOLE {
                    L::store(to, v);
                } else if len > t0 + L::N * half {
                    L::store_masked(masks[half], to, v);
                }
            }
        }
    }
}

/// `dw[c][p] += sum over images i and outputs t < len of dy_i[c][t] *
/// input_i[t + offsets[p]]`: the weight gradient of [`correlate`]
/// (Caffe's convolution weight gradient, without im2col), on AVX-512.
/// Image `i`'s input starts at `i * input_stride` of `input`; `dy` holds
/// whole images of `channels` planes of `len` output gradients, one
/// after another; `dw` holds `channels` rows of `offsets.len()`. Each
/// gradient sums over 16 lanes along the images in order and adds the
/// lanes once at its end, in an order fixed by the build: a run repeats
/// bit for bit. Says whether it ran (`false`: neither AVX-512 nor AVX2,
/// and nothing was written).
///
/// ```
/// use blob_kernels::cpu::{Taps, correlate_gradient};
/// // One image of 2 outputs, taps at offsets 0 and 1 of [1, 2, 3].
/// let taps = Taps { offsets: &[0, 1], len: 2 };
/// let mut dw = [0.5f32, 0.0];
/// if correlate_gradient(&[1.0, 2.0, 3.0], 3, taps, &[1.0, 10.0], 1, &mut dw) {
///     assert_eq!(dw, [21.5, 32.0]);
/// }
/// ```
///
/// # Panics
/// If `dy` is not whole images, `input` is shorter than its last image's
/// [`Taps::reach`], the input stride is shorter than that reach, or `dw`
/// shorter than the channels' taps.
pub fn correlate_gradient(
    input: &[f32],
    input_stride: usize,
    taps: Taps<'_>,
    dy: &[f32],
    channels: usize,
    dw: &mut [f32],
) -> bool {
    if isa() < Isa::Avx2 {
        return false;
    }
    let image = channels * taps.len;
    let count = taps.offsets.len();
    if image == 0 || count == 0 {
        return true;
    }
    assert!(
        dy.len().is_multiple_of(image),
        "correlate_gradient: {} output gradients are not whole images of {channels} x {}",
        dy.len(),
        taps.len
    );
    let images = dy.len() / image;
    let reach = taps.reach();
    assert!(
        images == 0
            || (input_stride >= reach && input.len() >= (images - 1) * input_stride + reach),
        "correlate_gradient: {images} images {input_stride} apart, each reading {reach}, need {} input values, got {}",
        images.saturating_sub(1) * input_stride + reach,
        input.len()
    );
    assert!(
        dw.len() >= channels * count,
        "correlate_gradient: {channels} channels of {count} taps need {} gradients, got {}",
        channels * count,
        dw.len()
    );
    #[cfg(not(target_arch = "x86_64"))]
    return false;
    // SAFETY: `isa` found one of the families; the asserts above prove
    // every read (each image's outputs below `len` at each offset, the
    // depth's tail masked) and write (`channels x count` gradients)
    // inside the slices.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        if isa() == Isa::Avx512 {
            Avx512::gradient(input, input_stride, taps, (dy, images), channels, dw)
        } else {
            Avx2::gradient(input, input_stride, taps, (dy, images), channels, dw)
        }
    };
    #[cfg(target_arch = "x86_64")]
    true
}

#[cfg(target_arch = "x86_64")]
/// [`correlate_gradient`] in tiles of `ROWS` channels by `COLS` taps
/// (4 x 4-5 on AVX-512: 20 sums in registers, 9 loads for 20
/// multiply-adds a step; 2 x 4-5 in AVX2's 16 registers), each tile
/// summed over every image before its lanes are added (a tile past the
/// last channel or tap repeats it and stores nothing for it).
///
/// # Safety
/// `L`'s instructions are enabled, and the slices are as
/// [`correlate_gradient`] checks.
#[inline(always)]
unsafe fn gradient_tiles<L: Lanes, const ROWS: usize, const COLS: usize>(
    input: &[f32],
    input_stride: usize,
    Taps { offsets, len }: Taps<'_>,
    (dy, images): (&[f32], usize),
    channels: usize,
    dw: &mut [f32],
) {
    let count = offsets.len();
    let body = len - len % L::N;
    // SAFETY: `L`'s instructions are enabled, per the caller.
    let (tail, whole) = unsafe { (L::first(len % L::N), L::first(L::N)) };
    for c0 in (0..channels).step_by(ROWS) {
        for p0 in (0..count).step_by(COLS) {
            // SAFETY: as above.
            let mut acc = [[unsafe { L::zero() }; COLS]; ROWS];
            // Image 0's rows and reads; each image's are a stride on.
            let mut grads: [*const f32; ROWS] =
                std::array::from_fn(|r| dy.as_ptr().wrapping_add((c0 + r).min(channels - 1) * len));
            let mut reads: [*const f32; COLS] = std::array::from_fn(|q| {
                input
                    .as_ptr()
                    .wrapping_add(offsets[(p0 + q).min(count - 1)])
            });
            for _ in 0..images {
                // SAFETY: outputs t..t + N, those the mask keeps, are below
                // `len`: inside `dy`, and inside `input` at every offset,
                // per the caller, who has `L`.
                unsafe {
                    for t in (0..body).step_by(L::N) {
                        gradient_step::<L, ROWS, COLS>(&mut acc, (&grads, &reads), t, whole);
                    }
                    if len % L::N != 0 {
                        gradient_step::<L, ROWS, COLS>(&mut acc, (&grads, &reads), body, tail);
                    }
                }
                for g in &mut grads {
                    *g = g.wrapping_add(channels * len);
                }
                for x in &mut reads {
                    *x = x.wrapping_add(input_stride);
                }
            }
            let rows = (channels - c0).min(ROWS);
            let cols = (count - p0).min(COLS);
            for (r, acc) in acc.iter().enumerate().take(rows) {
                for (q, &v) in acc.iter().enumerate().take(cols) {
                    // SAFETY: as above.
                    dw[(c0 + r) * count + p0 + q] += unsafe { L::reduce_add(v) };
                }
            }
        }
    }
}

/// One step of [`gradient_tiles`]: outputs `t..t + N` (those `mask`
/// keeps) of each row of gradients against each tap's reads, multiplied
/// into the tile's sums. A function, not a closure: a closure in generic
/// code is compiled without the family's instructions.
///
/// # Safety
/// `L`'s instructions are enabled; the kept values are inside `dy` and
/// `input`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn gradient_step<L: Lanes, const ROWS: usize, const COLS: usize>(
    acc: &mut [[L::V; COLS]; ROWS],
    (grads, reads): (&[*const f32; ROWS], &[*const f32; COLS]),
    t: usize,
    mask: L::M,
) {
    let mut x = [acc[0][0]; COLS];
    for (x, read) in x.iter_mut().zip(reads) {
        // SAFETY: the caller's.
        *x = unsafe { L::load_masked(mask, read.add(t)) };
    }
    for (acc, grad) in acc.iter_mut().zip(grads) {
        // SAFETY: the caller's.
        let g = unsafe { L::load_masked(mask, grad.add(t)) };
        for (acc, &x) in acc.iter_mut().zip(&x) {
            // SAFETY: the caller's.
            *acc = unsafe { L::fmadd(g, x, *acc) };
        }
    }
}
