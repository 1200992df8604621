//! A 1x1 convolution (Caffe's `Convolution` with `kernel_size: 1`) on
//! channel blocks: input and output laid 16 channels side by side, one
//! pixel a 16-lane vector ([`interleave_runs`](super::interleave_runs)'
//! layout, block after block), as a MobileNet's chains of depthwise and
//! pointwise layers hand them on. Each tile's input values are broadcast
//! straight from the blocks, so nothing is packed, and its outputs are
//! whole blocks, so they are stored as the next depthwise layer reads
//! them.

use super::finish::Rectifier;
#[cfg(target_arch = "x86_64")]
use super::finish::finished;
#[cfg(target_arch = "x86_64")]
use super::lanes::{Lanes, on_lanes};
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_MM_HINT_ET0, _mm_prefetch};

const BLOCK: usize = super::INTERLEAVED_LANES;

/// The deepest product [`pointwise_blocked`] sums in one chain: the
/// depth that `gemm_finished` sums in one block too, so both give the
/// same bits.
pub const POINTWISE_BLOCKED_MAX_DEPTH: usize = 1024;

/// A 1x1 convolution's sizes for [`pointwise_blocked`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointwiseShape {
    /// Input channels, a multiple of 16, at most
    /// [`POINTWISE_BLOCKED_MAX_DEPTH`].
    pub depth: usize,
    /// Output channels, a multiple of 16.
    pub outputs: usize,
    /// Pixels of a channel (height x width).
    pub pixels: usize,
    /// Whether the input is in blocks too; else in Caffe's planes (a
    /// chain's first 1x1 layer, whose tiles then broadcast from six
    /// neighbouring values of each plane).
    pub blocked_input: bool,
}

impl PointwiseShape {
    /// Whether [`pointwise_blocked`] takes this shape: whole blocks in and
    /// out, one chain of sums.
    ///
    /// ```
    /// use blob_kernels::cpu::PointwiseShape;
    /// let shape = PointwiseShape { depth: 32, outputs: 64, pixels: 9, blocked_input: true };
    /// assert!(shape.suits());
    /// assert!(!PointwiseShape { depth: 20, ..shape }.suits());
    /// ```
    pub fn suits(&self) -> bool {
        self.depth > 0
            && self.depth.is_multiple_of(BLOCK)
            && self.depth <= POINTWISE_BLOCKED_MAX_DEPTH
            && self.outputs > 0
            && self.outputs.is_multiple_of(BLOCK)
    }

    /// Where input channel `k` of pixel `p` lies.
    #[inline(always)]
    fn input_at(&self, k: usize, p: usize) -> usize {
        if self.blocked_input {
            ((k / BLOCK) * self.pixels + p) * BLOCK + k % BLOCK
        } else {
            k * self.pixels + p
        }
    }
}

/// Weights of `outputs x depth` (Caffe's 1x1 `weight` blob, row-major)
/// laid as [`pointwise_blocked`] reads them: for each block of 16 output
/// channels, each input channel's 16 weights side by side.
///
/// ```
/// use blob_kernels::cpu::block_pointwise_weights;
/// let weights: Vec<f32> = (0..32 * 2).map(|v| v as f32).collect(); // 32 x 2
/// let blocked = block_pointwise_weights(&weights, 32, 2);
/// assert_eq!(blocked[1], 2.0); // block 0, input 0, output 1
/// assert_eq!(blocked[16], 1.0); // block 0, input 1, output 0
/// ```
///
/// # Panics
/// If `outputs` is not a multiple of 16, or `weights` holds fewer than
/// `outputs x depth` values.
#[track_caller]
pub fn block_pointwise_weights(weights: &[f32], outputs: usize, depth: usize) -> Vec<f32> {
    assert!(
        outputs.is_multiple_of(BLOCK) && weights.len() >= outputs * depth,
        "block_pointwise_weights: {outputs} x {depth} weights in blocks of {BLOCK} outputs, \
         got {} values",
        weights.len()
    );
    let mut blocked = vec![0.0f32; outputs * depth];
    for (o, row) in weights.chunks_exact(depth.max(1)).take(outputs).enumerate() {
        let (block, lane) = (o / BLOCK, o % BLOCK);
        for (k, &w) in row.iter().enumerate() {
            blocked[(block * depth + k) * BLOCK + lane] = w;
        }
    }
    blocked
}

/// Caffe's 1x1 `Convolution` on channel blocks: `input` holds `depth / 16`
/// blocks of `pixels` vectors of 16 channels (or, where the shape says
/// the input is not in blocks, Caffe's `depth` planes); `weights` are
/// [`block_pointwise_weights`]'; `out[b]` holds output block `b`'s
/// pixels `first..first + out[b].len() / 16`, 16 channels a pixel. Each
/// output is the sum over input channels `k`, in order, of weight times
/// input, fused multiply-adds from zero, then `bias` added and
/// `rectifier` applied: the bits `gemm_finished` gives the same layer
/// in Caffe's layout. Runs on AVX-512 and AVX2, in plain loops (the same
/// bits, slowly) elsewhere.
///
/// ```
/// use blob_kernels::cpu::{PointwiseShape, Rectifier, block_pointwise_weights, pointwise_blocked};
/// // 16 inputs to 16 outputs over 2 pixels; output o weighs input o by 2.
/// let shape = PointwiseShape { depth: 16, outputs: 16, pixels: 2, blocked_input: true };
/// let weights: Vec<f32> = (0..256).map(|i| if i % 17 == 0 { 2.0 } else { 0.0 }).collect();
/// let blocked = block_pointwise_weights(&weights, 16, 16);
/// let input: Vec<f32> = (0..32).map(|v| v as f32).collect(); // pixel p, channel l: 16 p + l
/// let mut out = vec![0.0f32; 32];
/// pointwise_blocked(shape, &input, &blocked, (&[1.0; 16], Rectifier::None), 0, &mut [&mut out]);
/// assert_eq!(out[16 + 3], 2.0 * 19.0 + 1.0); // pixel 1, channel 3
/// ```
///
/// # Panics
/// If the shape does not [suit](PointwiseShape::suits), `input` or
/// `weights` is short, `bias` holds fewer than `outputs` values, `out`
/// is not one slice a block of whole pixels, or its pixels pass
/// `pixels`.
#[track_caller]
pub fn pointwise_blocked(
    shape: PointwiseShape,
    input: &[f32],
    weights: &[f32],
    (bias, rectifier): (&[f32], Rectifier),
    first: usize,
    out: &mut [&mut [f32]],
) {
    let PointwiseShape {
        depth,
        outputs,
        pixels,
        ..
    } = shape;
    let count = out.first().map_or(0, |o| o.len() / BLOCK);
    assert!(
        shape.suits()
            && input.len() >= depth * pixels
            && weights.len() >= depth * outputs
            && bias.len() >= outputs
            && out.len() == outputs / BLOCK
            && out.iter().all(|o| o.len() == count * BLOCK)
            && first + count <= pixels,
        "pointwise_blocked: {depth} -> {outputs} channels over {pixels} pixels (blocks of \
         {BLOCK}, at most {POINTWISE_BLOCKED_MAX_DEPTH} deep) needs {} input values, {} weights, \
         {outputs} biases and {} output blocks of pixels {first}..{}; got {}, {}, {} and {} blocks",
        depth * pixels,
        depth * outputs,
        outputs / BLOCK,
        first + count,
        input.len(),
        weights.len(),
        bias.len(),
        out.len()
    );
    if count == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let mut outs: Vec<*mut f32> = out.iter_mut().map(|o| o.as_mut_ptr()).collect();
        let ran = on_lanes!(|L| {
            // SAFETY: the assert above proves every read (input blocks of
            // `pixels`, weights of `depth x outputs`, `outputs` biases)
            // and every write (`count` pixels of each output block).
            unsafe {
                blocks::<L>(
                    shape,
                    (input.as_ptr(), weights.as_ptr(), bias.as_ptr()),
                    rectifier,
                    (first, count),
                    &mut outs,
                )
            }
        });
        if ran.is_some() {
            return;
        }
    }
    plain(shape, input, weights, (bias, rectifier), first, out);
}

/// [`pointwise_blocked`] in plain loops: the same sums in the same order.
fn plain(
    shape: PointwiseShape,
    input: &[f32],
    weights: &[f32],
    (bias, rectifier): (&[f32], Rectifier),
    first: usize,
    out: &mut [&mut [f32]],
) {
    for (b, block) in out.iter_mut().enumerate() {
        for (q, pixel) in block.chunks_exact_mut(BLOCK).enumerate() {
            for (l, v) in pixel.iter_mut().enumerate() {
                let mut sum = 0.0f32;
                for k in 0..shape.depth {
                    let x = input[shape.input_at(k, first + q)];
                    sum = weights[(b * shape.depth + k) * BLOCK + l].mul_add(x, sum);
                }
                *v = rectifier.apply(sum + bias[b * BLOCK + l]);
            }
        }
    }
}

/// Pixels a tile sums together: its outputs' broadcasts of one input
/// channel share each weight load.
#[cfg(target_arch = "x86_64")]
const TILE_PIXELS: usize = 6;

/// The deepest layer whose tiles on AVX-512 take one output block, not
/// four: a block's weights (64 bytes an input channel, 16 KB at this
/// depth) stay in L1 beside the tile's input, and one block's tile ran
/// faster over the large planes. One Zen 4 core (2026-12-06, the same
/// build, the choice switched at run time, medians of 4-5 alternating
/// runs in the net, ms): MobileNet-SSD's conv1 (32 -> 64 at 150 x 150)
/// 1.06 -> 1.00, conv2 0.876 -> 0.825, conv3 1.68 -> 1.62, conv4 0.875
/// -> 0.846, conv5 (256 deep) 1.70 -> 1.67, the 512-deep conv7 1.70 ->
/// 1.72 (so left at four); MobileNet-YOLOv3-lite's conv2 1.00 -> 0.94,
/// conv3 1.94 -> 1.84, conv4 0.98 -> 0.93.
#[cfg(target_arch = "x86_64")]
const ONE_BLOCK_MAX_DEPTH: usize = 256;

/// L1's sets of lines (32 KB of 8 ways, or 48 KB of 12, in lines of 64
/// bytes) and how many lines of one set a tile's input may take.
#[cfg(target_arch = "x86_64")]
const L1_SETS: usize = 64;
#[cfg(target_arch = "x86_64")]
const INPUT_LINES_A_SET: usize = 4;

/// Whether a tile reading `shape`'s input from Caffe's planes would find
/// its lines crowded into a few sets of L1, so that [`blocks`] lays each
/// chunk of the input in blocks first. Each step of a tile reads its
/// pixels from the next plane, `4 pixels` bytes on: where that is a
/// multiple of 4 KB (MobileNet-YOLOv3-lite's conv1 at 160 x 160, or 128
/// x 128, 224 x 224), every plane's line falls in the same set, no line
/// outlived the tile that read it, and the tiles ran 1.3x (AVX2) to
/// 1.7x (AVX-512's one block) slower than over other planes. There
/// AVX-512 takes four blocks' tiles, as fast as laying the chunk in
/// blocks for one block's (32 -> 64 at 160 x 160, 1.06 against 1.19
/// ms), and AVX2 lays it: MobileNet-YOLOv3-lite's conv1 in the net, one
/// Zen 4 core (2026-12-06, medians of 5 alternating runs), 1.33 -> 1.18
/// ms; over 150 x 150 planes, laid in blocks ran slower (0.93 -> 0.97).
#[cfg(target_arch = "x86_64")]
fn planes_share_sets(shape: &PointwiseShape) -> bool {
    if shape.blocked_input {
        return false;
    }
    let plane_bytes = shape.pixels * size_of::<f32>();
    let mut lines = [0usize; L1_SETS];
    for k in 0..shape.depth {
        lines[k * plane_bytes / 64 % L1_SETS] += 1;
    }
    lines.iter().any(|&n| n > INPUT_LINES_A_SET)
}

thread_local! {
    /// A chunk of a 1x1 layer's input laid in blocks by [`blocks`],
    /// kept between calls.
    #[cfg(target_arch = "x86_64")]
    static CHUNK_IN_BLOCKS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How many pixels past its own a tile of one block asks for the lines
/// of its output block, as writes, where the output is
/// [`OUT_AHEAD_MIN_BYTES`] or more: a net's large outputs lie beyond the
/// caches when a pass reaches them, and the tiles waited for their
/// stores' lines. MobileNet-SSD's conv1 (64 x 150 x 150, 5.8 MB) in the
/// net, one Zen 4 core (2026-12-06, medians of 5 alternating runs):
/// AVX-512 1.00 -> 0.905 ms, AVX2 1.045 -> 1.030; the layers of 2.9 MB
/// and less were level or slower with it, as were tiles of four blocks
/// (MobileNet-YOLOv3-lite's conv1, 64 x 160 x 160, 1.17 -> 1.21).
#[cfg(target_arch = "x86_64")]
const OUT_AHEAD_PIXELS: usize = 12;

/// The fewest output bytes whose tiles ask ahead ([`OUT_AHEAD_PIXELS`]).
#[cfg(target_arch = "x86_64")]
const OUT_AHEAD_MIN_BYTES: usize = 4 << 20;

/// The input bytes of the pixels whose tiles run before the next output
/// blocks take their turn: a chunk of the input stays in L2 while each
/// group of blocks passes over it, and each group's weights stay there
/// while it does.
#[cfg(target_arch = "x86_64")]
const CHUNK_BYTES: usize = 256 << 10;

/// [`pointwise_blocked`] in registers of `L`: tiles of [`TILE_PIXELS`]
/// pixels by four output blocks on AVX-512 (24 sums, four weight loads
/// and six broadcasts a step) or, up to [`ONE_BLOCK_MAX_DEPTH`], one, and one
/// block of two registers on AVX2 (12 sums in its 16 registers); a chunk
/// of pixels ([`CHUNK_BYTES`] of input) at a time, each group of blocks
/// over all of its tiles. Pixels outermost, every tile read all the
/// weights again: MobileNet-SSD's conv13 (1024 -> 1024 at 10 x 10, 4 MB
/// of weights) ran 1.15x slower than the gemm of its Caffe layout.
///
/// # Safety
/// `L`'s instructions are enabled; the pointers are as
/// [`pointwise_blocked`] checks its slices.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn blocks<L: Lanes>(
    shape: PointwiseShape,
    (input, weights, bias): (*const f32, *const f32, *const f32),
    rectifier: Rectifier,
    (first, count): (usize, usize),
    outs: &mut [*mut f32],
) {
    let args = (input, weights, bias);
    // Chunks of even size, so that none is a short tail that reads all
    // the weights again for a few pixels.
    let chunks = (count * shape.depth * size_of::<f32>())
        .div_ceil(CHUNK_BYTES)
        .max(1);
    let chunk = count.div_ceil(chunks).next_multiple_of(TILE_PIXELS);
    // Planes whose lines share L1's sets are read by tiles of four
    // blocks (four times the multiply-adds a line), or where a register
    // holds half a block (AVX2), laid in blocks a chunk at a time.
    let crowded = planes_share_sets(&shape);
    let four_blocks = L::N == BLOCK && (shape.depth > ONE_BLOCK_MAX_DEPTH || crowded);
    let lay_in_blocks = crowded && L::N < BLOCK;
    let ask_ahead =
        !four_blocks && shape.outputs * shape.pixels * size_of::<f32>() >= OUT_AHEAD_MIN_BYTES;
    let mut laid = if lay_in_blocks {
        CHUNK_IN_BLOCKS.with(|c| std::mem::take(&mut *c.borrow_mut()))
    } else {
        Vec::new()
    };

    let mut start = 0;
    // SAFETY: as the caller promises; each tile's pixels are below
    // `count` and its blocks below `outputs / 16`.
    unsafe {
        while start < count {
            let end = (start + chunk).min(count);
            // The tiles' input: the layer's, or this chunk's laid in
            // blocks, its pixels from `start`.
            let (shape, args, pixel_of_q) = if lay_in_blocks {
                let len = end - start;
                laid.resize(shape.depth * len, 0.0);
                for (kb, to) in laid.chunks_exact_mut(BLOCK * len).enumerate() {
                    // Plane kb 16 + l holds pixels first + start..first + end.
                    let runs: [&[f32]; BLOCK] = std::array::from_fn(|l| {
                        let plane = input.add((kb * BLOCK + l) * shape.pixels + first + start);
                        std::slice::from_raw_parts(plane, len)
                    });
                    super::interleave_runs(&runs, len, to);
                }
                let shape = PointwiseShape {
                    pixels: len,
                    blocked_input: true,
                    ..shape
                };
                (shape, (laid.as_ptr(), weights, bias), start.wrapping_neg())
            } else {
                (shape, args, first)
            };
            let mut b = 0;
            while b < outs.len() {
                let wide = four_blocks && outs.len() - b >= 4;
                let mut q = start;
                while q < end {
                    let pixels = [TILE_PIXELS, 3, 1]
                        .into_iter()
                        .find(|&p| p <= end - q)
                        .unwrap_or(1);
                    let at = (pixel_of_q.wrapping_add(q), q, b);
                    // A tile of `B` blocks, `P` pixels, `R` registers a block.
                    macro_rules! tile {
                        ($b:literal, $p:literal, $r:literal) => {
                            if shape.blocked_input {
                                tile::<L, $b, $p, $r, BLOCK>(
                                    shape, args, rectifier, at, outs, ask_ahead,
                                )
                            } else {
                                tile::<L, $b, $p, $r, 1>(
                                    shape, args, rectifier, at, outs, ask_ahead,
                                )
                            }
                        };
                    }
                    match (L::N == BLOCK, wide, pixels) {
                        (true, true, TILE_PIXELS) => tile!(4, 6, 1),
                        (true, true, 3) => tile!(4, 3, 1),
                        (true, true, _) => tile!(4, 1, 1),
                        (true, false, TILE_PIXELS) => tile!(1, 6, 1),
                        (true, false, 3) => tile!(1, 3, 1),
                        (true, false, _) => tile!(1, 1, 1),
                        (false, _, TILE_PIXELS) => tile!(1, 6, 2),
                        (false, _, 3) => tile!(1, 3, 2),
                        (false, _, _) => tile!(1, 1, 2),
                    }
                    q += pixels;
                }
                b += if wide { 4 } else { 1 };
            }
            start = end;
        }
    }
    if lay_in_blocks {
        CHUNK_IN_BLOCKS.with(|c| *c.borrow_mut() = laid);
    }
}

/// One tile: `B` output blocks (`R` registers each) by `P` pixels, from
/// pixel `pixel` of the input (`PS` values apart: 16 in blocks, 1 in
/// Caffe's planes) and `q` of the output slices, blocks from `b`; with
/// `ask_ahead`, it asks for the output's lines [`OUT_AHEAD_PIXELS`] on.
///
/// # Safety
/// As [`blocks`]; the tile's pixels and blocks exist.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn tile<L: Lanes, const B: usize, const P: usize, const R: usize, const PS: usize>(
    shape: PointwiseShape,
    (input, weights, bias): (*const f32, *const f32, *const f32),
    rectifier: Rectifier,
    (pixel, q, b): (usize, usize, usize),
    outs: &[*mut f32],
    ask_ahead: bool,
) {
    // SAFETY: as the caller promises: input block `kb`'s pixels
    // `pixel..pixel + P`, weight rows of blocks `b..b + B` and their
    // biases, and pixels `q..q + P` of output blocks `b..b + B`.
    unsafe {
        let acc = sums::<L, B, P, R, PS>(
            shape,
            input.add(shape.input_at(0, pixel)),
            weights.add(b * shape.depth * BLOCK),
        );
        for (i, acc) in acc.iter().enumerate() {
            let bias: [L::V; R] =
                std::array::from_fn(|r| L::load(bias.add((b + i) * BLOCK + r * L::N)));
            let out = outs[b + i].add(q * BLOCK);
            if ask_ahead {
                for p in 0..P {
                    let line = out.wrapping_add((p + OUT_AHEAD_PIXELS) * BLOCK);
                    // A prefetch reads nothing, past the block's end too.
                    _mm_prefetch::<_MM_HINT_ET0>(line as *const i8);
                }
            }
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

/// A tile's sums over the whole depth, in registers: `B` blocks of
/// weights from `weights` (`depth x 16` values a block) times `P` pixels
/// of the input from `x`, `PS` values apart. Returned by value,
/// in a function of its own: written into the tile's array in place, the
/// sums were stored to the stack at every step as well.
///
/// # Safety
/// `L`'s instructions are enabled; the reads are inside the input's and
/// the weights' blocks.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sums<L: Lanes, const B: usize, const P: usize, const R: usize, const PS: usize>(
    shape: PointwiseShape,
    x: *const f32,
    weights: *const f32,
) -> [[[L::V; R]; P]; B] {
    let depth = shape.depth;
    // SAFETY: as the caller promises.
    unsafe {
        let mut acc = [[[L::zero(); R]; P]; B];
        for k in 0..depth {
            let x = x.add(shape.input_at(k, 0));
            let w: [[L::V; R]; B] = std::array::from_fn(|i| {
                std::array::from_fn(|r| L::load(weights.add((i * depth + k) * BLOCK + r * L::N)))
            });
            let v: [L::V; P] = std::array::from_fn(|p| L::splat(*x.add(p * PS)));
            for (acc, w) in acc.iter_mut().zip(&w) {
                for (acc, &v) in acc.iter_mut().zip(&v) {
                    for (acc, &w) in acc.iter_mut().zip(w) {
                        *acc = L::fmadd(w, v, *acc);
                    }
                }
            }
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sums `gemm_finished` makes of the same layer in Caffe's
    /// layout: one fused chain from zero a output, the bias, the rectifier.
    fn caffe_layout(
        shape: PointwiseShape,
        weights: &[f32],
        x: &[f32],
        bias: &[f32],
        rectifier: Rectifier,
    ) -> Vec<f32> {
        let PointwiseShape {
            depth,
            outputs,
            pixels,
            ..
        } = shape;
        let mut y = vec![0.0f32; outputs * pixels];
        for o in 0..outputs {
            for n in 0..pixels {
                let mut sum = 0.0f32;
                for k in 0..depth {
                    sum = weights[o * depth + k].mul_add(x[k * pixels + n], sum);
                }
                y[o * pixels + n] = rectifier.apply(sum + bias[o]);
            }
        }
        y
    }

    fn blocked(planes: &[f32], channels: usize, pixels: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; channels * pixels];
        for c in 0..channels {
            for n in 0..pixels {
                out[((c / BLOCK) * pixels + n) * BLOCK + c % BLOCK] = planes[c * pixels + n];
            }
        }
        out
    }

    /// Planes 4 KB apart (160 x 160, 128 x 128) crowd L1's sets, as do
    /// many planes over a few; others (150 x 150), or an input in blocks,
    /// do not.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn planes_of_4_kb_share_sets() {
        let shape = |depth, pixels, blocked_input| PointwiseShape {
            depth,
            outputs: 64,
            pixels,
            blocked_input,
        };
        assert!(planes_share_sets(&shape(32, 160 * 160, false)));
        assert!(planes_share_sets(&shape(32, 128 * 128, false)));
        assert!(!planes_share_sets(&shape(32, 150 * 150, false)));
        // 152 x 152: planes 4 lines past a multiple of 4 KB, 16 sets.
        assert!(!planes_share_sets(&shape(32, 152 * 152, false)));
        assert!(planes_share_sets(&shape(256, 152 * 152, false)));
        assert!(!planes_share_sets(&shape(32, 160 * 160, true)));
    }

    fn values(len: usize, seed: u32) -> Vec<f32> {
        (0..len)
            .map(|i| {
                let h = (i as u32 ^ seed)
                    .wrapping_mul(2_654_435_761)
                    .rotate_left(13);
                (h % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// Every tile (four blocks, past [`ONE_BLOCK_MAX_DEPTH`] or from
    /// planes whose lines share a set, and one; six, three and one
    /// pixels), the input in blocks and in Caffe's planes (those of 4 KB
    /// laid in blocks a chunk at a time on AVX2, over three chunks), a
    /// range of pixels cut out of the middle, each rectifier, on the ISA
    /// this run has and in plain loops: the bits of the plain product in
    /// Caffe's layout. A tap order changed, a sum begun from its first
    /// product or a chunk laid from the wrong pixels fails.
    #[test]
    fn blocks_give_the_caffe_layouts_bits() {
        let shapes = [
            (16, 16, 1),
            (32, 80, 13),
            (48, 64, 25),
            (64, 96, 7),
            (32, 64, 100),
            (272, 80, 13),
            (288, 64, 7),
            (48, 64, 1024),
            (16, 16, 9),
            (64, 32, 5120),
        ];
        let layouts = [true, false].into_iter().cycle();
        for ((depth, outputs, pixels), blocked_input) in shapes.into_iter().zip(layouts) {
            let shape = PointwiseShape {
                depth,
                outputs,
                pixels,
                blocked_input,
            };
            let w = values(outputs * depth, 1);
            let x = values(depth * pixels, 2);
            let bias = values(outputs, 3);
            let packed = block_pointwise_weights(&w, outputs, depth);
            let input = if blocked_input {
                blocked(&x, depth, pixels)
            } else {
                x.clone()
            };
            for rectifier in [Rectifier::None, Rectifier::Relu, Rectifier::Relu6] {
                let want = blocked(
                    &caffe_layout(shape, &w, &x, &bias, rectifier),
                    outputs,
                    pixels,
                );
                let (first, count) = (pixels / 4, pixels - pixels / 4 - pixels / 5);
                for vectors in [true, false] {
                    let mut got = vec![f32::NAN; outputs * count];
                    let mut outs: Vec<&mut [f32]> = got.chunks_mut(count * BLOCK).collect();
                    let finish = (&bias[..], rectifier);
                    if vectors {
                        pointwise_blocked(shape, &input, &packed, finish, first, &mut outs);
                    } else {
                        plain(shape, &input, &packed, finish, first, &mut outs);
                    }
                    for b in 0..outputs / BLOCK {
                        let want = &want[(b * pixels + first) * BLOCK..][..count * BLOCK];
                        let got = &got[b * count * BLOCK..][..count * BLOCK];
                        let same = want
                            .iter()
                            .zip(got)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        let isa = if vectors {
                            crate::cpu::isa().name()
                        } else {
                            "plain loops"
                        };
                        assert!(
                            same,
                            "{depth} -> {outputs} at {pixels}, {rectifier:?}, {isa}, block {b}"
                        );
                    }
                }
            }
        }
    }
}
