//! A net's first convolution (Caffe's `Convolution` over a few input
//! channels, MobileNet's and MobileNet-SSD's 3 x 3 x 3 at stride 2) from
//! Caffe's planes into channel blocks, 16 output channels side by side,
//! one pixel a 16-lane vector: the layout the depthwise layer after it
//! reads where it lies, so that it need not lay the 150 x 150 planes in
//! blocks itself. Each output sums the same products in the same order
//! as [`correlate`](super::correlate) and im2col + gemm: fused from zero
//! over the taps (channel, row, column), the bias added last.
//!
//! The input's rows are read through a ring of three padded rows a
//! channel (11 KB for three channels 300 wide, in L1), each row copied in
//! once, so the padding is written and no copy of the image is made.

use std::ops::Range;

use super::finish::Rectifier;
#[cfg(target_arch = "x86_64")]
use super::finish::finished;
#[cfg(target_arch = "x86_64")]
use super::lanes::{Lanes, on_lanes};

const BLOCK: usize = super::INTERLEAVED_LANES;

/// The input channels [`shallow_3x3_to_blocked`] takes at most: a net's
/// first layer (RGB, or a few more), its taps' rows all in L1.
pub const SHALLOW_BLOCKED_MAX_CHANNELS: usize = 4;

/// A first layer's input for [`shallow_3x3_to_blocked`]: its channels'
/// planes (height x width each), the 3 x 3 window's stride (1 or 2)
/// along both axes, padding 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShallowWindow {
    /// Input channels, 1 to [`SHALLOW_BLOCKED_MAX_CHANNELS`].
    pub channels: usize,
    /// Input rows.
    pub height: usize,
    /// Input columns.
    pub width: usize,
    /// The window's step, 1 or 2.
    pub stride: usize,
}

impl ShallowWindow {
    /// Output rows and columns: `(n + 2 - 3) / stride + 1` of each.
    ///
    /// ```
    /// use blob_kernels::cpu::ShallowWindow;
    /// let window = ShallowWindow { channels: 3, height: 300, width: 300, stride: 2 };
    /// assert_eq!(window.output(), (150, 150));
    /// ```
    pub fn output(&self) -> (usize, usize) {
        let (height, width, stride) = (self.height, self.width, self.stride);
        super::BlockedPlane {
            height,
            width,
            stride,
        }
        .output()
    }

    /// Whether [`shallow_3x3_to_blocked`] takes this window.
    ///
    /// ```
    /// use blob_kernels::cpu::ShallowWindow;
    /// let window = ShallowWindow { channels: 3, height: 300, width: 300, stride: 2 };
    /// assert!(window.suits());
    /// assert!(!ShallowWindow { channels: 8, ..window }.suits());
    /// ```
    pub fn suits(&self) -> bool {
        (1..=SHALLOW_BLOCKED_MAX_CHANNELS).contains(&self.channels)
            && matches!(self.stride, 1 | 2)
            && self.height > 0
            && self.width > 0
    }

    /// Taps an output sums: 9 a channel.
    fn taps(&self) -> usize {
        self.channels * 9
    }
}

/// Caffe's `Convolution` of `kernel_size: 3`, `pad: 1`, `stride` 1 or 2
/// over a few input channels (a net's first layer), output rows `rows`
/// written into channel blocks: `input` holds the channels' planes,
/// `weights` are [`block_pointwise_weights`](super::block_pointwise_weights)'
/// of Caffe's `(outputs, channels, 3, 3)` blob (a depth of `channels x
/// 9`), and `out[b]` receives output block `b`'s pixels of those rows,
/// 16 channels a pixel. Each output is the sum over the taps (channel,
/// row, column), in order, of weight times input (0 past the border),
/// fused multiply-adds from zero, then `bias` added and `rectifier`
/// applied: the bits of im2col + gemm and of
/// [`correlate`](super::correlate). `ring` is the caller's buffer,
/// kept between calls. Says whether it ran (`false`: neither AVX-512
/// nor AVX2, nothing written).
///
/// ```
/// use blob_kernels::cpu::{Rectifier, ShallowWindow, block_pointwise_weights, shallow_3x3_to_blocked};
/// // One channel of ones, 2 x 2; 16 outputs, output o weighs every tap by o.
/// let window = ShallowWindow { channels: 1, height: 2, width: 2, stride: 1 };
/// let weights: Vec<f32> = (0..16 * 9).map(|i| (i / 9) as f32).collect();
/// let blocked = block_pointwise_weights(&weights, 16, 9);
/// let mut out = vec![0.0f32; 4 * 16];
/// let mut ring = Vec::new();
/// let finish = (&[0.5f32; 16][..], Rectifier::None);
/// if shallow_3x3_to_blocked(&[1.0; 4], window, &blocked, finish, 0..2, &mut [&mut out], &mut ring) {
///     // Pixel 0's window holds all four ones: output 3 is 4 x 3 + 0.5.
///     assert_eq!(out[3], 12.5);
/// }
/// ```
///
/// # Panics
/// If the window does not [suit](ShallowWindow::suits), `input` holds
/// fewer than its planes' values, `weights` fewer than `outputs x
/// channels x 9` or `bias` fewer than `outputs` (16 a block of `out`),
/// `rows` pass the output's, or a block of `out` is not those rows'
/// pixels.
#[track_caller]
pub fn shallow_3x3_to_blocked(
    input: &[f32],
    window: ShallowWindow,
    weights: &[f32],
    (bias, rectifier): (&[f32], Rectifier),
    rows: Range<usize>,
    out: &mut [&mut [f32]],
    ring: &mut Vec<f32>,
) -> bool {
    let (oh, ow) = window.output();
    let outputs = out.len() * BLOCK;
    let pixels = rows.len() * ow;
    assert!(
        window.suits()
            && input.len() >= window.channels * window.height * window.width
            && weights.len() >= outputs * window.taps()
            && bias.len() >= outputs
            && rows.start <= rows.end
            && rows.end <= oh
            && out.iter().all(|o| o.len() == pixels * BLOCK),
        "shallow_3x3_to_blocked: {window:?} into {} blocks of rows {rows:?} (of {oh}) needs {} \
         input values, {} weights, {outputs} biases and {} values a block; got {}, {}, {} and \
         {:?}",
        out.len(),
        window.channels * window.height * window.width,
        outputs * window.taps(),
        pixels * BLOCK,
        input.len(),
        weights.len(),
        bias.len(),
        out.iter().map(|o| o.len()).collect::<Vec<_>>()
    );
    if pixels == 0 || out.is_empty() {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let mut outs: Vec<*mut f32> = out.iter_mut().map(|o| o.as_mut_ptr()).collect();
        let ran = on_lanes!(|L| {
            // SAFETY: the assert above proves every read (the planes,
            // `outputs x taps` weights, `outputs` biases) and every
            // write (the rows' pixels of each block); the ring is sized
            // below.
            unsafe {
                by_rows::<L>(
                    window,
                    (input.as_ptr(), weights.as_ptr(), bias.as_ptr()),
                    rectifier,
                    rows,
                    &mut outs,
                    ring,
                )
            }
        });
        if ran.is_some() {
            return true;
        }
    }
    let _ = (rectifier, ring);
    false
}

/// The padded row `padded` (input row `padded - 1`, zeros above and
/// below the plane) of each channel into its slot of the ring.
fn lay_row(window: ShallowWindow, input: &[f32], ring: &mut [f32], padded: usize) {
    let wp = window.width + 2;
    let plane = window.height * window.width;
    for c in 0..window.channels {
        let to = &mut ring[(c * 3 + padded % 3) * wp..][..wp];
        if padded == 0 || padded > window.height {
            to.fill(0.0);
        } else {
            let row = &input[c * plane + (padded - 1) * window.width..][..window.width];
            to[0] = 0.0;
            to[1..=window.width].copy_from_slice(row);
            to[wp - 1] = 0.0;
        }
    }
}

/// Output pixels a tile sums together.
#[cfg(target_arch = "x86_64")]
const TILE_PIXELS: usize = 6;

/// [`shallow_3x3_to_blocked`] in registers of `L`, a row at a time:
/// the row's padded input rows laid in the ring, then tiles of
/// [`TILE_PIXELS`] pixels by one block (two registers) on AVX2, two
/// blocks on AVX-512: 12 sums either way.
///
/// # Safety
/// `L`'s instructions are enabled; the pointers are as
/// [`shallow_3x3_to_blocked`] checks its slices.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn by_rows<L: Lanes>(
    window: ShallowWindow,
    (input, weights, bias): (*const f32, *const f32, *const f32),
    rectifier: Rectifier,
    rows: Range<usize>,
    outs: &mut [*mut f32],
    ring: &mut Vec<f32>,
) {
    let (_, ow) = window.output();
    let (s, wp) = (window.stride, window.width + 2);
    // SAFETY: the caller checked the planes' length.
    let planes = unsafe {
        std::slice::from_raw_parts(input, window.channels * window.height * window.width)
    };
    ring.resize(window.channels * 3 * wp, 0.0);
    let mut laid_to = None;
    for y in rows.clone() {
        for padded in s * y..s * y + 3 {
            if laid_to.is_none_or(|last| padded > last) {
                lay_row(window, planes, ring, padded);
                laid_to = Some(padded);
            }
        }
        // Tap (c, i, j) reads ring slot (c, (s y + i) % 3) from column
        // j: offsets, not rows and columns, so that the compiler cannot
        // keep one tap's broadcasts for the next column's (at stride 2,
        // column 2 of one pixel is column 0 of the next), which took
        // more registers than the sums left and spilled them.
        let mut offsets = [0usize; 9 * SHALLOW_BLOCKED_MAX_CHANNELS];
        for (k, offset) in offsets.iter_mut().take(window.taps()).enumerate() {
            let (c, i, j) = (k / 9, k / 3 % 3, k % 3);
            *offset = (c * 3 + (s * y + i) % 3) * wp + j;
        }
        let offsets = &offsets[..window.taps()];
        let first = (y - rows.start) * ow;
        let mut b = 0;
        while b < outs.len() {
            let two = L::N == BLOCK && outs.len() - b >= 2;
            let mut x = 0;
            while x < ow {
                let pixels = [TILE_PIXELS, 3, 1]
                    .into_iter()
                    .find(|&p| p <= ow - x)
                    .unwrap_or(1);
                let at = Tile {
                    ring: ring.as_ptr(),
                    offsets,
                    column: x,
                    weights,
                    bias,
                    block: b,
                    taps: window.taps(),
                    pixel: first + x,
                };
                macro_rules! tile {
                    ($b:literal, $p:literal, $r:literal) => {
                        if s == 1 {
                            tile::<L, $b, $p, $r, 1>(at, rectifier, outs)
                        } else {
                            tile::<L, $b, $p, $r, 2>(at, rectifier, outs)
                        }
                    };
                }
                // SAFETY: pixels x..x + pixels of row y and blocks b..
                // b + (1 or 2) exist; the ring's rows hold wp values,
                // the window's columns s x .. s (x + pixels - 1) + 2 of
                // them inside.
                unsafe {
                    match (L::N == BLOCK, two, pixels) {
                        (true, true, TILE_PIXELS) => tile!(2, 6, 1),
                        (true, true, 3) => tile!(2, 3, 1),
                        (true, true, _) => tile!(2, 1, 1),
                        (true, false, TILE_PIXELS) => tile!(1, 6, 1),
                        (true, false, 3) => tile!(1, 3, 1),
                        (true, false, _) => tile!(1, 1, 1),
                        (false, _, TILE_PIXELS) => tile!(1, 6, 2),
                        (false, _, 3) => tile!(1, 3, 2),
                        (false, _, _) => tile!(1, 1, 2),
                    }
                }
                x += pixels;
            }
            b += if two { 2 } else { 1 };
        }
    }
}

/// Where a tile reads and writes.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Tile<'a> {
    /// The ring of padded rows, and where each tap's first pixel reads
    /// in it.
    ring: *const f32,
    offsets: &'a [usize],
    /// The tile's first output column.
    column: usize,
    weights: *const f32,
    bias: *const f32,
    /// Its first output block.
    block: usize,
    /// Taps an output sums (the weights' depth).
    taps: usize,
    /// Its first pixel in the output blocks' slices.
    pixel: usize,
}

/// One tile: `B` output blocks (`R` registers each) by `P` pixels at
/// stride `S`.
///
/// # Safety
/// As [`by_rows`]; the tile's pixels and blocks exist.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn tile<L: Lanes, const B: usize, const P: usize, const R: usize, const S: usize>(
    at: Tile<'_>,
    rectifier: Rectifier,
    outs: &[*mut f32],
) {
    // SAFETY: as the caller promises.
    unsafe {
        let mut acc = [[[L::zero(); R]; P]; B];
        let x = at.ring.add(S * at.column);
        for (k, &offset) in at.offsets.iter().enumerate() {
            let x = x.add(offset);
            let w: [[L::V; R]; B] = std::array::from_fn(|i| {
                std::array::from_fn(|r| {
                    L::load(
                        at.weights
                            .add(((at.block + i) * at.taps + k) * BLOCK + r * L::N),
                    )
                })
            });
            let v: [L::V; P] = std::array::from_fn(|p| L::splat(*x.add(S * p)));
            for (acc, w) in acc.iter_mut().zip(&w) {
                for (acc, &v) in acc.iter_mut().zip(&v) {
                    for (acc, &w) in acc.iter_mut().zip(w) {
                        *acc = L::fmadd(w, v, *acc);
                    }
                }
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            let bias: [L::V; R] =
                std::array::from_fn(|r| L::load(at.bias.add((at.block + i) * BLOCK + r * L::N)));
            let out = outs[at.block + i].add(at.pixel * BLOCK);
            for (p, acc) in acc.iter().enumerate() {
                for r in 0..R {
                    L::store(
                        out.add(p * BLOCK + r * L::N),
                        finished::<L>(acc[r], bias[r], rectifier),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{Isa, block_pointwise_weights, isa};

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut next = crate::cpu::window_3x3_checks::values(seed);
        (0..n).map(|_| next()).collect()
    }

    /// Caffe's sums over the zero-padded planes: each output's taps in
    /// order, fused from zero, the bias, the rectifier; in blocks.
    fn caffe_in_blocks(
        window: ShallowWindow,
        input: &[f32],
        weights: &[f32],
        bias: &[f32],
        rectifier: Rectifier,
    ) -> Vec<f32> {
        let (oh, ow) = window.output();
        let (h, w, s) = (window.height as isize, window.width as isize, window.stride);
        let mut out = vec![0.0f32; bias.len() * oh * ow];
        for o in 0..bias.len() {
            for y in 0..oh {
                for x in 0..ow {
                    let mut sum = 0.0f32;
                    for c in 0..window.channels {
                        for i in 0..3 {
                            for j in 0..3 {
                                let (r, q) = ((s * y + i) as isize - 1, (s * x + j) as isize - 1);
                                let v = if (0..h).contains(&r) && (0..w).contains(&q) {
                                    input[(c * h as usize + r as usize) * w as usize + q as usize]
                                } else {
                                    0.0
                                };
                                sum = weights[((o * window.channels + c) * 3 + i) * 3 + j]
                                    .mul_add(v, sum);
                            }
                        }
                    }
                    let pixel = y * ow + x;
                    out[((o / BLOCK) * oh * ow + pixel) * BLOCK + o % BLOCK] =
                        rectifier.apply(sum + bias[o]);
                }
            }
        }
        out
    }

    /// Strides 1 and 2, one to four channels, one to three blocks,
    /// planes whose rows end inside a tile, and the output's rows in two
    /// bands (as two cores take them) with one ring kept over every
    /// call: Caffe's bits, on whichever of AVX-512 and AVX2 runs.
    #[test]
    fn first_layers_into_blocks_give_caffes_bits() {
        let mut ring = Vec::new();
        let cases = [
            (3, 300, 300),
            (3, 9, 7),
            (1, 1, 1),
            (2, 5, 14),
            (4, 8, 8),
            (3, 2, 3),
        ];
        for (n, (channels, height, width)) in cases.into_iter().enumerate() {
            for stride in [2, 1] {
                for outputs in [16, 32, 48] {
                    let window = ShallowWindow {
                        channels,
                        height,
                        width,
                        stride,
                    };
                    let (oh, ow) = window.output();
                    let mut input = values(channels * height * width, 1 + n as u32);
                    input.iter_mut().step_by(5).for_each(|v| *v = -0.0);
                    let weights = values(outputs * channels * 9, 20 + n as u32);
                    let bias = values(outputs, 40 + n as u32);
                    let blocked = block_pointwise_weights(&weights, outputs, channels * 9);
                    for rectifier in [Rectifier::None, Rectifier::Relu, Rectifier::Relu6] {
                        let want = caffe_in_blocks(window, &input, &weights, &bias, rectifier);
                        let mut got = vec![f32::NAN; want.len()];
                        let split = oh / 2;
                        let mut ran = true;
                        for band in [0..split, split..oh] {
                            let mut outs: Vec<&mut [f32]> = got
                                .chunks_exact_mut(oh * ow * BLOCK)
                                .map(|block| {
                                    &mut block[band.start * ow * BLOCK..band.end * ow * BLOCK]
                                })
                                .collect();
                            ran &= shallow_3x3_to_blocked(
                                &input,
                                window,
                                &blocked,
                                (&bias, rectifier),
                                band,
                                &mut outs,
                                &mut ring,
                            );
                        }
                        assert_eq!(ran, isa() >= Isa::Avx2);
                        if !ran {
                            continue;
                        }
                        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        assert!(
                            bits(&want) == bits(&got),
                            "{window:?}, {outputs} outputs, {rectifier:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "shallow_3x3_to_blocked")]
    fn rows_past_the_output_are_refused() {
        let window = ShallowWindow {
            channels: 3,
            height: 4,
            width: 4,
            stride: 2,
        };
        let mut out = vec![0.0f32; 3 * 2 * BLOCK];
        shallow_3x3_to_blocked(
            &[0.0; 48],
            window,
            &[0.0; 16 * 27],
            (&[0.0; 16], Rectifier::None),
            0..3,
            &mut [&mut out],
            &mut Vec::new(),
        );
    }
}
