//! Winograd's minimal filtering F(4x4, 3x3), F(6x6, 3x3), F(2x2, 3x3) and
//! F(4x4, 5x5) (Lavin and Gray, "Fast Algorithms for Convolutional
//! Neural Networks", 2015) for the CPU forward pass of 3x3 and 5x5,
//! stride-1 convolutions:
//! SqueezeNet's, GoogLeNet's and ResNet's 3x3 layers, MTCNN's, CaffeNet's
//! and GoogLeNet's 5x5 ones.
//!
//! Each 6x6 input tile (overlapping by two) and each 3x3 kernel are carried
//! into a 36-point domain where the convolution becomes a product point by
//! point, and back to a 4x4 output tile. Summed over the input channels,
//! the products are 36 gemms of `(cout x cin)` by `(cin x tiles)`: 2.25
//! multiply-adds per output and input channel where im2col's gemm does 9.
//! A 5x5 kernel takes 8x8 input tiles (overlapping by four) and 64 points:
//! 4 multiply-adds where im2col does 25. The same 64 points carry a 3x3
//! kernel to 6x6 output tiles: 1.78 multiply-adds where F(4x4, 3x3) does
//! 2.25, taken where the plane's tiles waste fewer of them (O-Net's 21 x
//! 21 outputs: 16 tiles of 36 outputs against 36 of 16).
//!
//! F(2x2, 3x3) goes the other way: 4x4 input tiles, 16 points, 4
//! multiply-adds per output and input channel, but 16 transformed weights
//! per channel pair where F(4x4, 3x3) has 36. It is taken where those
//! weights come from memory each pass to serve few tiles (ResNet-50's
//! res5 at batch 1, 7 x 7 outputs; MobileNet-YOLOv2 lite's conv21, 10 x
//! 10), and the reading, not the products, is the cost.
//!
//! The results differ from im2col's in the last bits (the transforms add
//! and scale before multiplying): within 1e-6 of the magnitudes involved
//! on trained weights for F(4x4, 3x3), about 3e-6 for the 8-point
//! variants, whose points 1/2 and -1/2 scale more (which is why a
//! TRAIN-phase net keeps to F(4x4, 3x3): [`ConvGeometry::winograd_tile`]'s
//! `wide`). Only f32 passes come here; f64 passes, which the
//! gradient checks use as the exact reference, keep im2col, as do the
//! backward passes.
//!
//! The tiles are cut into blocks, each transformed, multiplied and
//! transformed back by one core while its buffers stay in that core's L2;
//! inside a block, 16 channels of a tile go side by side through the
//! transforms, one per SIMD lane. Where the transformed weights are too
//! many to stay in cache (YOLO's and ResNet's deep layers: 9-75 MB), a
//! block takes as many tiles as L3 holds, so each weight comes from
//! memory once a pass, in panels read front to back, and the cores share
//! the block's output channels rather than its tiles.

use std::marker::PhantomData;
use std::ops::Range;

use blob_kernels::cpu::{self, AlignedVec};
use blob_runtime::{MathElement, Precision};

use super::cpu::{ConvGeometry, Finish};
use crate::layer::{Result, ensure};

/// The output tile side of F(4x4, 3x3) and F(4x4, 5x5).
const TILE: usize = 4;
/// The output tile side of F(6x6, 3x3).
const WIDE_TILE: usize = 6;
/// The output tile side of F(2x2, 3x3).
const NARROW_TILE: usize = 2;
/// The interpolation points of the transforms but infinity (Toom-Cook's):
/// an input tile of side `span` (the output tile's and the kernel's, less
/// one) takes the first `span - 1`: 4 for F(2x2, 3x3), 6 for F(4x4,
/// 3x3), 8 for F(4x4, 5x5) and F(6x6, 3x3).
const FINITE_POINTS: [f64; 7] = [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5];
/// The widest input tile's side, output tile's side and kernel's.
const MOST_SPAN: usize = 8;
const MOST_TILE: usize = WIDE_TILE;
const MOST_TAPS: usize = 5;
/// Points of the widest transformed domain.
const MOST_POINTS: usize = MOST_SPAN * MOST_SPAN;
/// Channels transformed side by side, one per lane of an AVX-512 register.
const LANES: usize = 16;
/// Tiles a block holds at least (where there are as many): the gemm
/// kernel's rows.
const MIN_BLOCK: usize = 8;
/// One block's transformed input and products, in values: 512 KiB of
/// f32, half a Zen 5 core's L2.
const BLOCK_VALUES: usize = 1 << 17;
/// A block's buffers, in values, where the transformed weights do not
/// stay in cache: 16 MiB of f32, within a Zen core's share of L3.
const STREAMED_BLOCK_VALUES: usize = 1 << 22;
/// Channels, in and out, below which im2col stays faster: the output
/// transform costs the same per output channel whatever the depth, and
/// a shallow gemm is cheap. One thread, same runs, µs, Winograd against
/// im2col: 8 -> 32 on 48 x 48 181 / 113, 12 -> 32 203 / 166, 16 -> 32
/// 220 / 264, 16 -> 16 161 / 173; P-Net's conv2 at 30 x 30 (10 -> 16)
/// 47 / 27.
const MIN_CHANNELS: usize = 16;

/// Transformed weights, in values, that stay in a core's L2 between
/// passes (1 MiB of f32): with these, even a few tiles pay (O-Net's
/// conv3, 4 tiles of 64 x 64 channels, 1.5x).
const CACHED_WEIGHTS: usize = 1 << 18;
/// Outputs each reading of transformed weights that do not stay in cache
/// must serve, for each core the pass runs on (a block reads them all
/// from memory): below this, im2col's gemm, which reads its packed
/// weights once and a quarter as many of them, is faster. Its cores
/// share the products where they share the memory's bandwidth, so a
/// pass on more cores needs more outputs a reading. The layers in their
/// nets, ms, Zen 4, 2026-12-06, Winograd against im2col, one core /
/// two: ResNet-50's res5 3x3 (512 -> 512 at 7 x 7, 49 outputs, 38 MB of
/// transformed weights) 1.66 / 2.42 and 1.28 / 1.40; MobileNet-YOLOv2
/// lite's conv21 (256 -> 1024 at 10 x 10) 2.20 / 4.50 and 1.44 / 2.43;
/// YOLOv3-tiny's 512 -> 1024 at 13 x 13 (2026-11-29, one core) 9.9 /
/// 16.2; res4's (256 -> 256 at 14 x 14) 0.87-0.92 / 2.3-2.5.
const OUTPUTS_PER_WEIGHT_READ_A_CORE: usize = 24;
/// Tiles whose products, point by point, cost as much as reading their
/// transformed weights from memory (4 bytes at about 12 GB/s a core
/// against one lane of the FMA peak's multiply-adds): what decides
/// between F(4x4, 3x3) and F(2x2, 3x3) where the weights stream.
/// Zen 3, AVX2, 2026-12-07, one core / two, ms, F(4x4, 3x3) against
/// F(2x2, 3x3), batch 1, each tile count F(4x4)'s / F(2x2)'s: 512 ->
/// 512 at 7 x 7 (4 / 16 tiles) 4.27 / 3.29 and 3.34 / 2.24; 256 -> 256
/// at 8 x 8 (4 / 16) 1.14 / 0.97 and 0.79 / 0.65; at 10 x 10 (9 / 25)
/// 1.56 / 1.33 and 1.04 / 0.79; 512 -> 512 at 10 x 10 5.39 / 4.42 and
/// 4.20 / 2.99; 256 -> 256 at 12 x 12 (9 / 36) 1.49 / 1.68 and 1.02 /
/// 1.09; at 14 x 14 (16 / 49) 2.42 / 2.33 and 1.53 / 1.53; at 16 x 16
/// (16 / 64) 2.20 / 2.85 and 1.45 / 1.78. F(4x4)'s 36 points times r
/// and its tiles against F(2x2)'s 16 times r and its fit them with r
/// from 10 (one core) to 12 (two).
const TILES_A_WEIGHT_READ_COSTS: usize = 10;
/// F(4x4, 3x3)'s transformed weights, in values, past which they come
/// from memory on each pass rather than from L3 (4 MiB of f32, an eighth
/// of a Zen 3's or Zen 4's L3), in the nets measured: below it F(2x2,
/// 3x3)'s fewer weights save little and its products cost. Zen 3, AVX2,
/// one core, 2026-12-07, batch 1, ms, F(4x4, 3x3) against F(2x2, 3x3):
/// GoogLeNet's inception_5a/3x3 and 5b/3x3 (160 -> 320 and 192 -> 384
/// at 7 x 7, 7.4 and 10.6 MB) 0.83 / 0.72 and 1.17 / 0.85; SqueezeNet
/// v1.1's fire8/expand3x3 and fire9 (64 -> 256 at 13 x 13, 2.4 MB) 0.67
/// / 0.87 and 0.72 / 0.93; in a net of 12 MB in all, 128 -> 128 and 128
/// -> 160 at 7 x 7 (2.4 and 2.9 MB) 0.26 / 0.32 and 0.31 / 0.40.
const WEIGHTS_FROM_MEMORY: usize = 1 << 20;

/// How many fewer products, in hundredths, F(6x6, 3x3) must do than
/// F(4x4, 3x3) on a plane, its tiles' waste counted, to be taken: its
/// 64-point transforms cost more a point than the 36-point ones, and
/// round about three times as coarsely. One thread, AVX2, ms, F(6x6,
/// 3x3) against F(4x4, 3x3): O-Net's conv2 (21 x 21, 21% fewer) 0.103 /
/// 0.115; darknet19's 3x3 layers at 208 x 208 (19.5% fewer) 9.1 / 10.0,
/// at 52 x 52 (14.8%) 6.0 / 6.8 and 6.0 / 7.2; ResNet-50's at 56 x 56
/// and 28 x 28 (9%) and darknet19's at 26 x 26 (9%) level. 13 x 13 and
/// 14 x 14 planes do as many either way, 7 x 7 ones 78% more.
const WIDE_TILE_SAVING: usize = 14;
/// Input channels (of a group) past which F(6x6, 3x3) is not taken: its
/// rounding grows with the channels summed. Against im2col, over the
/// outputs' largest, on values uniform in [-1, 1): 16 and 32 channels
/// 6e-6 to 7.5e-6, 64 9e-6, 128 1.4e-5 to 1.6e-5 (F(4x4, 5x5) 9e-6 at
/// 128); O-Net's conv2 on its trained weights 3.4e-6.
const WIDE_TILE_MOST_CHANNELS: usize = 32;

impl ConvGeometry {
    /// The output tile side of the Winograd variant the forward pass over
    /// `T` takes, if any: a 3x3 or 5x5 window at stride 1 without
    /// dilation, f32, and enough channels on both sides for the
    /// transforms to pay. `wide` allows the 8-point variants, F(4x4, 5x5)
    /// and F(6x6, 3x3), whose rounding is about three times F(4x4,
    /// 3x3)'s; without it 5x5 windows take none, 3x3 ones F(4x4, 3x3),
    /// or F(2x2, 3x3) where its weights, fewer, are what the pass waits
    /// on.
    pub fn winograd_tile<T: MathElement>(&self, wide: bool) -> Option<usize> {
        let (first, then) = match self.kernel {
            [3, 3]
                if wide && self.channels_in <= WIDE_TILE_MOST_CHANNELS && self.wide_tiles_pay() =>
            {
                (WIDE_TILE, Some(TILE))
            }
            [3, 3] => (TILE, None),
            [5, 5] if wide => (TILE, None),
            _ => return None,
        };
        let chosen = std::iter::once(first)
            .chain(then)
            .find(|&tile| self.winograd_pays::<T>(tile))?;
        Some(if chosen == TILE && self.narrow_tiles_pay() {
            NARROW_TILE
        } else {
            chosen
        })
    }

    /// Whether F(2x2, 3x3) costs less than F(4x4, 3x3): where F(4x4,
    /// 3x3)'s transformed weights come from memory on each pass and serve
    /// few tiles a reading, F(2x2, 3x3)'s 16 points read 2.25 times fewer
    /// of them, for more products over its 4-output tiles (1.78 times as
    /// many where neither wastes outputs past the plane's edge).
    fn narrow_tiles_pay(&self) -> bool {
        // Past `WEIGHTS_FROM_MEMORY`, either tiling's weights stream
        // (F(2x2, 3x3)'s are 16/36 of them, past `CACHED_WEIGHTS`), read
        // once a block.
        let cost = |tile: usize| {
            let tiling = Tiling::of(self, tile, 1);
            tiling.span * tiling.span * (tiling.blocks() * TILES_A_WEIGHT_READ_COSTS + tiling.tiles)
        };
        self.kernel == [3, 3]
            && 36 * self.channels_in * self.channels_out > WEIGHTS_FROM_MEMORY
            && cost(NARROW_TILE) < cost(TILE)
    }

    /// Whether Winograd's forward pass in output tiles of side `tile`
    /// pays over im2col's.
    fn winograd_pays<T: MathElement>(&self, tile: usize) -> bool {
        let span = tile + self.kernel[0] - 1;
        let points = span * span;
        let covered = tile * tile * self.oh.div_ceil(tile) * self.ow.div_ceil(tile);
        T::PRECISION == Precision::F32
            && self.stride == [1, 1]
            && self.dilation == [1, 1]
            && self.channels_in >= MIN_CHANNELS
            && self.channels_out >= MIN_CHANNELS
            && self.oh * self.ow > 0
            // The tiles must cover at most a third more than the outputs:
            // on MTCNN's small planes (3x3 and 9x9 outputs in 1 and 9
            // tiles, 44% of each wasted) the transforms cost more than
            // the products they save. Where the weights are many, the
            // products are the cost, and F(4x4, 3x3)'s are fewer than
            // im2col's even so (13 x 13: 2.6x fewer).
            && (self.oh * self.ow * 4 >= 3 * covered
                || points * self.channels_in * self.channels_out > CACHED_WEIGHTS)
            && (points * self.channels_in * self.channels_out <= CACHED_WEIGHTS
                || self.batch * self.oh * self.ow
                    >= OUTPUTS_PER_WEIGHT_READ_A_CORE
                        * cpu::cores()
                        * Tiling::of(self, tile, 1).blocks())
    }

    /// Whether F(6x6, 3x3) does [`WIDE_TILE_SAVING`] fewer products than
    /// F(4x4, 3x3) over this plane's tiles.
    fn wide_tiles_pay(&self) -> bool {
        let products = |tile: usize| {
            let span = tile + 2;
            span * span * self.oh.div_ceil(tile) * self.ow.div_ceil(tile)
        };
        products(WIDE_TILE) * 100 <= products(TILE) * (100 - WIDE_TILE_SAVING)
    }
}

/// What a Winograd convolution keeps between passes: the weights'
/// transform (remade when the weights change) and each core's block
/// buffers (grow-only).
#[derive(Default)]
pub(crate) struct WinogradScratch {
    /// `U[group][point][ci][co]`: each group's and point's `(cin x
    /// cout)` matrix.
    weights: AlignedVec<f32>,
    /// The weights' write stamp, and the channels of a group, the groups
    /// and the input tile side `weights` was made for.
    made_from: Option<(u64, usize, usize, usize, usize)>,
    parts: Vec<BlockBuffers>,
}

/// A streamed block's buffers: its transformed input, which every core
/// reads, and each core's products and rows.
#[derive(Default)]
struct StreamedBuffers {
    input: AlignedVec<f32>,
    parts: Vec<BlockBuffers>,
}

thread_local! {
    /// The buffers of the streamed layers a thread runs, one set for
    /// all: up to 16 MiB a layer, which YOLOv3's 31 such layers would
    /// otherwise each keep (220 MB).
    static STREAMED: std::cell::RefCell<StreamedBuffers> =
        std::cell::RefCell::new(StreamedBuffers::default());
}

/// One core's buffers: a block's transformed input `V[point][tile][ci]`
/// and products `M[point][tile][co]`, and the rows of a strip of tiles,
/// 16 channels side by side ([`cpu::interleave_runs`]).
#[derive(Default)]
struct BlockBuffers {
    input: AlignedVec<f32>,
    products: AlignedVec<f32>,
    rows: AlignedVec<f32>,
}

/// How the tiles of a pass are cut.
#[derive(Clone, Copy, Debug)]
struct Tiling {
    /// Output tile side: 4, 2 for F(2x2, 3x3) or 6 for F(6x6, 3x3).
    tile: usize,
    /// Input tile side: the output tile's and the window's, less one.
    span: usize,
    /// Tiles down and across one output plane.
    down: usize,
    across: usize,
    /// Tiles in the whole batch.
    tiles: usize,
    /// The groups the blobs' channels are cut into (Caffe's `group`): a
    /// pass convolves one group's, and the next image's channels of that
    /// group lie `groups` times as far on as one image's of the group.
    groups: usize,
    /// Tiles per block (the last block may hold fewer).
    per_block: usize,
    /// Blocks per core's part.
    blocks_per_part: usize,
    /// Whether the transformed weights come from memory on each pass:
    /// then the blocks run one after another, each shared by the cores
    /// along its output channels, so the weights are read once a block
    /// whatever the cores.
    streamed: bool,
}

impl Tiling {
    /// The tiling of a pass of `g`, one group's geometry (its channels,
    /// the whole batch) of `groups`, in output tiles of side `tile`.
    fn of(g: &ConvGeometry, tile: usize, groups: usize) -> Tiling {
        let span = tile + g.kernel[0] - 1;
        let (down, across) = (g.oh.div_ceil(tile), g.ow.div_ceil(tile));
        let tiles = g.batch * down * across;
        let points = span * span;
        let per_tile = points * (g.channels_in + g.channels_out);
        let streamed = points * g.channels_in * g.channels_out > CACHED_WEIGHTS;
        let (most, cores) = if streamed {
            // Weights that come from memory are read once a block: the
            // block takes as many tiles as its buffers allow in L3, and
            // the cores share its output channels instead.
            ((STREAMED_BLOCK_VALUES / per_tile).max(MIN_BLOCK), 1)
        } else {
            // A block per core where there are enough tiles for each core
            // to fill the gemm kernel's rows, and as many blocks on each
            // core: SqueezeNet's fire2/expand3x3 (196 tiles in blocks of
            // at most 45) ran 3 blocks on one core and 2 on the other,
            // 1.5x faster on two cores than on one; in 6 blocks of 33,
            // 1.8x.
            (
                (BLOCK_VALUES / per_tile).max(MIN_BLOCK),
                cpu::cores().min(tiles.div_ceil(MIN_BLOCK)).max(1),
            )
        };
        // At least one block: an empty batch has no tiles, and no blocks
        // to divide them among.
        let blocks = tiles.div_ceil(most).next_multiple_of(cores).max(1);
        let per_block = tiles.div_ceil(blocks).max(1);
        let blocks = tiles.div_ceil(per_block);
        let parts = cpu::cores().clamp(1, blocks.max(1));
        Tiling {
            tile,
            span,
            down,
            across,
            tiles,
            groups,
            per_block,
            blocks_per_part: blocks.div_ceil(parts).max(1),
            streamed,
        }
    }

    /// Blocks in a pass: how often the transformed weights are read.
    fn blocks(&self) -> usize {
        self.tiles.div_ceil(self.per_block)
    }

    /// The strips of tiles `first..first + count`: for each run of them
    /// in one row of tiles of one image, its first tile (counted from
    /// `first`), its length, its image, its row of tiles and its first
    /// tile's column.
    fn strips(&self, first: usize, count: usize) -> impl Iterator<Item = Strip> {
        let across = self.across;
        let down = self.down;
        let mut t = 0;
        std::iter::from_fn(move || {
            (t < count).then(|| {
                let (row, tx) = ((first + t) / across, (first + t) % across);
                let strip = Strip {
                    start: t,
                    len: (across - tx).min(count - t),
                    image: row / down,
                    ty: row % down,
                    tx,
                };
                t += strip.len;
                strip
            })
        })
    }

    /// Points of the transformed domain.
    fn points(&self) -> usize {
        self.span * self.span
    }

    /// Values of [`BlockBuffers::rows`] a block needs: a tile's input rows
    /// or its output rows of a strip of `across` tiles, 16 lanes a pixel.
    fn row_values(&self) -> usize {
        let input = self.span * (self.tile * self.across + self.span - self.tile);
        let output = self.tile * self.tile * self.across;
        input.max(output) * LANES
    }
}

/// Tiles side by side in one row of tiles of one image.
#[derive(Clone, Copy, Debug)]
struct Strip {
    start: usize,
    len: usize,
    image: usize,
    ty: usize,
    tx: usize,
}

/// `y = conv(x) + bias`, finished as `finish` says, through Winograd's
/// transforms of output tile side `tile`, the channels cut into `groups`
/// (Caffe's `group`; `g` is one group's geometry, its channels over the
/// whole batch, and `tile` its [`winograd_tile`](ConvGeometry::winograd_tile));
/// `weights_stamp` is the weight blob's
/// [`write_stamp`](blob_runtime::SyncedMemory::write_stamp). Image `n`'s
/// output goes to `y[n * stride..]`, `stride` at least an image's output
/// (all its groups').
#[allow(clippy::too_many_arguments)]
pub(crate) fn forward(
    g: &ConvGeometry,
    tile: usize,
    groups: usize,
    scratch: &mut WinogradScratch,
    weights_stamp: u64,
    x: &[f32],
    weight: &[f32],
    finish: Finish<'_, f32>,
    (y, stride): (&mut [f32], usize),
) -> Result<()> {
    let (cin, cout) = (g.channels_in, g.channels_out);
    // The cores write their tiles through `Output` at once: images that
    // overlapped would be written by two.
    assert!(
        stride >= groups * cout * g.oh * g.ow,
        "a Winograd pass's images of {} values each, {stride} apart",
        groups * cout * g.oh * g.ow
    );
    let tiling = Tiling::of(g, tile, groups);
    let len = tiling.points() * cpu::panels_len(cin, cout);
    let made_from = Some((weights_stamp, cin, cout, groups, tiling.span));
    if scratch.made_from != made_from {
        ensure(&mut scratch.weights, groups * len)?;
        let taps = g.kernel[0];
        let per_group = cout * cin * taps * taps;
        for (gi, u) in scratch.weights[..groups * len]
            .chunks_exact_mut(len)
            .enumerate()
        {
            let w = &weight[gi * per_group..][..per_group];
            transform_weights((cin, cout, taps), tiling.span, w, u);
        }
        scratch.made_from = made_from;
    }
    if tiling.tiles == 0 {
        return Ok(());
    }
    let (x, y) = (
        &x[..g.batch * groups * cin * g.h * g.w],
        &mut y[..g.batch.saturating_sub(1) * stride + groups * cout * g.oh * g.ow],
    );
    for gi in 0..groups {
        // Each group's channels from its first, to the end of the blobs:
        // its later images lie past the other groups'.
        let out = Output::new(&mut y[gi * cout * g.oh * g.ow..], stride);
        let group = (
            &scratch.weights[gi * len..][..len],
            &x[gi * cin * g.h * g.w..],
        );
        let finish = finish.channels(gi * cout, cout);
        if tiling.streamed {
            STREAMED.with(|buffers| {
                let buffers = &mut *buffers.borrow_mut();
                streamed_blocks(g, &tiling, group, finish, buffers, &out)
            })?;
        } else {
            cached_blocks(g, &tiling, group, finish, &mut scratch.parts, &out)?;
        }
    }
    Ok(())
}

/// The blocks of a pass whose transformed weights `u` stay in cache,
/// shared among the cores, each block transformed, multiplied and
/// transformed back by one core in its own `parts`.
fn cached_blocks(
    g: &ConvGeometry,
    tiling: &Tiling,
    (u, x): (&[f32], &[f32]),
    finish: Finish<'_, f32>,
    parts: &mut Vec<BlockBuffers>,
    out: &Output<'_>,
) -> Result<()> {
    let (cin, cout) = (g.channels_in, g.channels_out);
    let blocks = tiling.blocks();
    let count = blocks.div_ceil(tiling.blocks_per_part);
    if parts.len() < count {
        parts.resize_with(count, BlockBuffers::default);
    }
    for b in &mut parts[..count] {
        ensure(
            &mut b.input,
            tiling.points() * point_stride(cin, tiling.per_block),
        )?;
        ensure(
            &mut b.products,
            tiling.points() * point_stride(cout, tiling.per_block),
        )?;
        ensure(&mut b.rows, tiling.row_values())?;
    }
    cpu::on_cores(parts[..count].iter_mut().enumerate(), |(p, buffers)| {
        for block in p * tiling.blocks_per_part..((p + 1) * tiling.blocks_per_part).min(blocks) {
            let first = block * tiling.per_block;
            let tiles = (first, tiling.per_block.min(tiling.tiles - first));
            let (v, m) = (&mut buffers.input[..], &mut buffers.products[..]);
            transform_input(
                g,
                tiling,
                x,
                tiles,
                (&Output::new(v, 0), 0..cin),
                &mut buffers.rows,
            );
            multiply(tiling, u, (v, cin), 0..cout, tiles.1, m);
            transform_output(
                g,
                tiling,
                (m, 0..cout),
                finish,
                tiles,
                &mut buffers.rows,
                out,
            );
        }
    });
    Ok(())
}

/// The blocks of a pass whose transformed weights do not stay in cache,
/// one after another: each block's input transformed by this core, then
/// its output channels cut across the cores in whole panels of the
/// weights, each core multiplying and transforming back its own. Each
/// weight is read once a block, by one core.
fn streamed_blocks(
    g: &ConvGeometry,
    tiling: &Tiling,
    (u, x): (&[f32], &[f32]),
    finish: Finish<'_, f32>,
    StreamedBuffers { input: v, parts }: &mut StreamedBuffers,
    out: &Output<'_>,
) -> Result<()> {
    let (cin, cout) = (g.channels_in, g.channels_out);
    let panels = cout.div_ceil(cpu::PANEL_COLUMNS);
    let per_part = panels.div_ceil(cpu::cores().clamp(1, panels)) * cpu::PANEL_COLUMNS;
    let count = cout.div_ceil(per_part);
    if parts.len() < count {
        parts.resize_with(count, BlockBuffers::default);
    }
    ensure(v, tiling.points() * point_stride(cin, tiling.per_block))?;
    for (i, b) in parts[..count].iter_mut().enumerate() {
        let channels = per_part.min(cout - i * per_part);
        ensure(
            &mut b.products,
            tiling.points() * point_stride(channels, tiling.per_block),
        )?;
        ensure(&mut b.rows, tiling.row_values())?;
    }
    for block in 0..tiling.blocks() {
        let first = block * tiling.per_block;
        let tiles = (first, tiling.per_block.min(tiling.tiles - first));
        // Each core transforms its share of the input's groups of 16
        // channels: one alone left the others waiting (ResNet-50's
        // res3 and res4 3 x 3 layers).
        let lane_groups = cin.div_ceil(LANES);
        let per_transform = lane_groups.div_ceil(count) * LANES;
        let shared = Output::new(v, 0);
        cpu::on_cores(parts[..count].iter_mut().enumerate(), |(i, b)| {
            let channels = (i * per_transform).min(cin)..cin.min((i + 1) * per_transform);
            transform_input(g, tiling, x, tiles, (&shared, channels), &mut b.rows);
        });
        let v = &v[..];
        cpu::on_cores(parts[..count].iter_mut().enumerate(), |(i, b)| {
            let channels = i * per_part..cout.min((i + 1) * per_part);
            let m = &mut b.products[..];
            multiply(tiling, u, (v, cin), channels.clone(), tiles.1, m);
            transform_output(g, tiling, (m, channels), finish, tiles, &mut b.rows, out);
        });
    }
    Ok(())
}

/// `U = G g G^T` for every (output, input) channel pair of `taps x
/// taps` kernels, for input tiles of side `span`, in f64, stored
/// point-major, each point's matrix the `(cin x cout)` right side of its
/// gemm packed in panels
/// ([`cpu::pack_panels`]): `u[point * len + (co / 32 * cin + ci) * 32 +
/// co % 32]`, zero past the last output. Read panel by panel, weights
/// that do not stay in cache stream from memory front to back.
fn transform_weights(
    (cin, cout, taps): (usize, usize, usize),
    span: usize,
    weight: &[f32],
    u: &mut [f32],
) {
    let len = cpu::panels_len(cin, cout);
    u[..span * span * len].fill(0.0);
    let at = |point: usize, ci: usize, co: usize| {
        point * len
            + (co / cpu::PANEL_COLUMNS * cin + ci) * cpu::PANEL_COLUMNS
            + co % cpu::PANEL_COLUMNS
    };
    let g = kernel_transform(taps, span);
    for co in 0..cout {
        for ci in 0..cin {
            let k = &weight[(co * cin + ci) * taps * taps..][..taps * taps];
            // G g: span x taps.
            let mut gk = [[0.0f64; MOST_TAPS]; MOST_SPAN];
            for (row, gr) in gk[..span].iter_mut().zip(&g) {
                for (j, v) in row[..taps].iter_mut().enumerate() {
                    *v = (0..taps).map(|a| gr[a] * f64::from(k[a * taps + j])).sum();
                }
            }
            for (r, row) in gk[..span].iter().enumerate() {
                for (c, gc) in g[..span].iter().enumerate() {
                    let v: f64 = (0..taps).map(|b| row[b] * gc[b]).sum();
                    u[at(r * span + c, ci, co)] = v as f32;
                }
            }
        }
    }
}

/// `G`, the kernel's transform into input tiles of side `span` (`span x
/// taps`; the output tile's side is `span - taps + 1`), in Lavin's
/// normalisation: the row of finite point `a` is `a^k /
/// prod(a - b)` over the other finite points `b`, for the taps `k`;
/// infinity's picks the last tap. For 3 taps, rows 1/4 (1, 0, 0), -1/6
/// (1, 1, 1), -1/6 (1, -1, 1), 1/24 (1, 2, 4), 1/24 (1, -2, 4) and (0, 0,
/// 1).
fn kernel_transform(taps: usize, span: usize) -> [[f64; MOST_TAPS]; MOST_SPAN] {
    let finite = &FINITE_POINTS[..span - 1];
    let mut g = [[0.0; MOST_TAPS]; MOST_SPAN];
    for (j, &a) in finite.iter().enumerate() {
        let norm: f64 = finite
            .iter()
            .enumerate()
            .filter(|&(l, _)| l != j)
            .map(|(_, &b)| a - b)
            .product();
        for (k, v) in g[j][..taps].iter_mut().enumerate() {
            *v = a.powi(k as i32) / norm;
        }
    }
    g[span - 1][taps - 1] = 1.0;
    g
}

/// Values from one point's matrix of a block's transformed input or
/// products (`tiles x channels`) to the next's: one cache line more than
/// the matrix, so that a tile's points, read or written one after
/// another, do not all fall in the same few sets of L1 (at 16 tiles of
/// 64 channels the matrices are 4 KiB apart, and the 64 points of an
/// F(6x6, 3x3) tile's products would share one set's 8 ways).
#[inline(always)]
fn point_stride(channels: usize, tiles: usize) -> usize {
    channels * tiles + 16
}

/// Lanes of values: one per channel of a group of 16.
type Lanes = [f32; LANES];

/// Tiles `first..first + count` of the batch through Winograd's input
/// transform into `v` (`V[point][tile][ci]`). The transforms run on 16
/// channels of a tile at once, one per lane: a strip of tiles' input
/// rows are laid 16 channels side by side first in `rows`, so each
/// tile's points are whole registers.
fn transform_input(
    g: &ConvGeometry,
    tiling: &Tiling,
    x: &[f32],
    tiles: (usize, usize),
    v: (&Output<'_>, Range<usize>),
    rows: &mut [f32],
) {
    match (tiling.span, tiling.tile) {
        (8, WIDE_TILE) => input_tiles::<8, WIDE_TILE>(g, tiling, x, tiles, v, rows),
        (4, _) => input_tiles::<4, NARROW_TILE>(g, tiling, x, tiles, v, rows),
        (8, _) => input_tiles::<8, TILE>(g, tiling, x, tiles, v, rows),
        _ => input_tiles::<6, TILE>(g, tiling, x, tiles, v, rows),
    }
}

/// [`transform_input`] for `SPAN` and `OUT`, the tiling's input and
/// output tile sides.
fn input_tiles<const SPAN: usize, const OUT: usize>(
    g: &ConvGeometry,
    tiling: &Tiling,
    x: &[f32],
    (first, count): (usize, usize),
    (v, channels): (&Output<'_>, Range<usize>),
    rows: &mut [f32],
) {
    let cin = g.channels_in;
    assert!(
        v.len >= SPAN * SPAN * point_stride(cin, count),
        "a Winograd block's transformed input holds {} values, not {}",
        v.len,
        SPAN * SPAN * point_stride(cin, count)
    );
    cpu::vectorized(
        #[inline(always)]
        || {
            // The transforms' buffers, made once a call: `between`, made
            // inside each tile's transform, was zeroed there for every
            // tile (3-4 KiB).
            let mut d = [[0.0; LANES]; MOST_POINTS];
            let mut e = [[0.0; LANES]; MOST_POINTS];
            let mut between = [[0.0; LANES]; MOST_POINTS];
            for c0 in channels.clone().step_by(LANES) {
                let lanes = LANES.min(cin - c0);
                for strip in tiling.strips(first, count) {
                    let width = OUT * strip.len + SPAN - OUT;
                    input_rows((g, tiling), x, strip, c0..c0 + lanes, width, rows);
                    for k in 0..strip.len {
                        for (p, values) in d[..SPAN * SPAN].iter_mut().enumerate() {
                            let at = ((p / SPAN) * width + OUT * k + p % SPAN) * LANES;
                            *values = *rows[at..].first_chunk().expect("a strip's rows hold it");
                        }
                        input_transform::<SPAN>(&d, &mut between, &mut e);
                        let t = strip.start + k;
                        let at = |p: usize| p * point_stride(cin, count) + t * cin + c0;
                        // The lanes of this tile's channels `c0..c0 +
                        // lanes`, which no other caller writes (each takes
                        // its own channels).
                        // SAFETY: as above.
                        let lanes_at = |p: usize, len: usize| unsafe { v.run(at(p), len) };
                        // Whole registers apart from the last channels':
                        // one copy of either length, which the compiler
                        // would make of the two, is a call to `memcpy`.
                        if lanes == LANES {
                            for (p, values) in e[..SPAN * SPAN].iter().enumerate() {
                                *first_lanes_mut(lanes_at(p, LANES)) = *values;
                            }
                        } else {
                            for (p, values) in e[..SPAN * SPAN].iter().enumerate() {
                                lanes_at(p, lanes).copy_from_slice(&values[..lanes]);
                            }
                        }
                    }
                }
            }
        },
    );
}

/// The products, point by point, of `count` tiles' transformed input `v` (`cin`
/// channels) by the transformed weights `u`, for the output channels
/// `channels` (whole panels of `u` from its first): `(count x cin)` by
/// `(cin x channels)` into `m` (`M[point][tile][channel - first]`).
fn multiply(
    tiling: &Tiling,
    u: &[f32],
    (v, cin): (&[f32], usize),
    channels: Range<usize>,
    count: usize,
    m: &mut [f32],
) {
    let len = u.len() / tiling.points();
    let from = channels.start * cin;
    let width = channels.len();
    let panels = |p: usize| &u[p * len + from..][..cpu::panels_len(cin, width)];
    for p in 0..tiling.points() {
        // The next point's weights are asked for as this one's product
        // ends: they lie beyond the caches (a layer's transformed weights
        // are 4 to 7 times its weights), and each point's first panel
        // waited for them. One Zen 4 core, 2026-12-06, medians of 5-7
        // alternating runs in ResNet-50, ms: res4's 3x3 layers on
        // AVX-512 1.06-1.10 -> 1.00-1.02, on AVX2 1.26-1.27 -> 1.19-1.21;
        // res2's and res3's 1-6% faster; res5's (im2col) level.
        let then = (p + 1 < tiling.points()).then(|| panels(p + 1));
        cpu::gemm_panels(
            count,
            width,
            cin,
            &v[p * point_stride(cin, count)..][..count * cin],
            (panels(p), then),
            &mut m[p * point_stride(width, count)..][..count * width],
        );
    }
}

/// Tiles `first..first + count` of output channels `channels` from their
/// products `m` (`M[point][tile][channel - first]`) through Winograd's
/// output transform, plus the bias and the activation, into `out`. 16
/// channels of a tile go through at once, one per lane; a strip's output
/// rows are taken apart into the channels' rows last.
fn transform_output(
    g: &ConvGeometry,
    tiling: &Tiling,
    products: (&[f32], Range<usize>),
    finish: Finish<'_, f32>,
    tiles: (usize, usize),
    rows: &mut [f32],
    out: &Output<'_>,
) {
    match (tiling.span, tiling.tile) {
        (8, WIDE_TILE) => {
            output_tiles::<8, WIDE_TILE>(g, tiling, products, finish, tiles, rows, out)
        }
        (8, _) => output_tiles::<8, TILE>(g, tiling, products, finish, tiles, rows, out),
        (4, _) => output_tiles::<4, NARROW_TILE>(g, tiling, products, finish, tiles, rows, out),
        _ => output_tiles::<6, TILE>(g, tiling, products, finish, tiles, rows, out),
    }
}

/// [`transform_output`] for `SPAN` and `OUT`, the tiling's input and
/// output tile sides.
fn output_tiles<const SPAN: usize, const OUT: usize>(
    g: &ConvGeometry,
    tiling: &Tiling,
    (m, channels): (&[f32], Range<usize>),
    finish: Finish<'_, f32>,
    (first, count): (usize, usize),
    rows: &mut [f32],
    out: &Output<'_>,
) {
    let width_m = channels.len();
    cpu::vectorized(
        #[inline(always)]
        || {
            // Made once a call, as in `input_tiles`.
            let mut s = [[0.0; LANES]; MOST_POINTS];
            let mut o = [[0.0; LANES]; MOST_TILE * MOST_TILE];
            let mut between = [[0.0; LANES]; MOST_TILE * MOST_SPAN];
            for c0 in channels.clone().step_by(LANES) {
                let lanes = LANES.min(channels.end - c0);
                let mut b = [0.0; LANES];
                b[..lanes].copy_from_slice(&finish.bias[c0..c0 + lanes]);
                for strip in tiling.strips(first, count) {
                    let width = OUT * strip.len;
                    for k in 0..strip.len {
                        let t = strip.start + k;
                        let at = |p: usize| {
                            p * point_stride(width_m, count) + t * width_m + c0 - channels.start
                        };
                        // As in `input_tiles`: no `memcpy` of either length.
                        if lanes == LANES {
                            for (p, values) in s[..SPAN * SPAN].iter_mut().enumerate() {
                                *values = *first_lanes(&m[at(p)..]);
                            }
                        } else {
                            for (p, values) in s[..SPAN * SPAN].iter_mut().enumerate() {
                                values[..lanes].copy_from_slice(&m[at(p)..][..lanes]);
                            }
                        }
                        output_transform::<SPAN, OUT>(&s, &mut between, &mut o);
                        for (p, values) in o[..OUT * OUT].iter().enumerate() {
                            let at = ((p / OUT) * width + OUT * k + p % OUT) * LANES;
                            let to: &mut Lanes = rows[at..]
                                .first_chunk_mut()
                                .expect("a strip's rows hold it");
                            for l in 0..LANES {
                                to[l] = values[l] + b[l];
                            }
                        }
                    }
                    // The strip's rows are in L1.
                    finish.activate(&mut rows[..OUT * width * LANES]);
                    output_rows((g, tiling), strip, c0..c0 + lanes, width, rows, out);
                }
            }
        },
    );
}

/// The input tile's rows under `strip` (from its first tile's top-left input
/// pixel, `width` pixels) of channels `channels` (at most 16), side by
/// side into `rows`: row `r`, pixel `i`, lane `l` at `(r * width + i) *
/// 16 + l`, padding and lanes past the channels zero. `x` holds one
/// group's channels of the tiling's groups from its first.
fn input_rows(
    (g, tiling): (&ConvGeometry, &Tiling),
    x: &[f32],
    strip: Strip,
    channels: std::ops::Range<usize>,
    width: usize,
    rows: &mut [f32],
) {
    let plane = g.h * g.w;
    // The strip's first input column, in padded coordinates: columns
    // `left..left + width` of the padded image.
    let left = strip.tx * tiling.tile;
    // Its columns inside the image, as offsets into the strip's row.
    let (from, to) = (
        g.pad[1].saturating_sub(left).min(width),
        (g.w + g.pad[1]).saturating_sub(left).min(width),
    );
    for r in 0..tiling.span {
        let row = &mut rows[r * width * LANES..][..width * LANES];
        let iy = (strip.ty * tiling.tile + r)
            .checked_sub(g.pad[0])
            .filter(|&iy| iy < g.h);
        let Some(iy) = iy.filter(|_| to > from) else {
            row.fill(0.0);
            continue;
        };
        row[..from * LANES].fill(0.0);
        row[to * LANES..].fill(0.0);
        let ix = left + from - g.pad[1];
        let mut runs: [&[f32]; LANES] = [&[]; LANES];
        for (run, c) in runs.iter_mut().zip(channels.clone()) {
            *run = &x[(strip.image * tiling.groups * g.channels_in + c) * plane + iy * g.w + ix..]
                [..to - from];
        }
        cpu::interleave_runs(
            &runs[..channels.len()],
            to - from,
            &mut row[from * LANES..to * LANES],
        );
    }
}

/// The output rows of `strip` in `rows` (`width` pixels a row, 16
/// lanes a pixel) into channels `channels` of `out` (one group's of the
/// tiling's groups, from its first), clipped to the output plane.
fn output_rows(
    (g, tiling): (&ConvGeometry, &Tiling),
    strip: Strip,
    channels: std::ops::Range<usize>,
    width: usize,
    rows: &[f32],
    out: &Output<'_>,
) {
    let plane = g.oh * g.ow;
    let (oy, ox) = (strip.ty * tiling.tile, strip.tx * tiling.tile);
    let len = width.min(g.ow - ox);
    for r in 0..tiling.tile.min(g.oh - oy) {
        let mut runs: [&mut [f32]; LANES] = std::array::from_fn(|_| <&mut [f32]>::default());
        for (run, c) in runs.iter_mut().zip(channels.clone()) {
            let at = strip.image * out.image_stride + c * plane + (oy + r) * g.ow + ox;
            // SAFETY: these pixels belong to this strip's tiles, which
            // only this block writes, and each run is a different
            // channel's row.
            *run = unsafe { out.run(at, len) };
        }
        cpu::deinterleave_runs(
            &rows[r * width * LANES..][..len * LANES],
            len,
            &mut runs[..channels.len()],
        );
    }
}

/// The first 16 values of `from`.
#[inline(always)]
fn first_lanes(from: &[f32]) -> &Lanes {
    from.first_chunk().expect("a whole register's channels")
}

/// The first 16 values of `to`.
#[inline(always)]
fn first_lanes_mut(to: &mut [f32]) -> &mut Lanes {
    to.first_chunk_mut().expect("a whole register's channels")
}

/// `B^T d B` of each lane's `SPAN x SPAN` patch, point `row * SPAN +
/// column`: Winograd's input transform, down the columns and then along
/// the rows, `t` holding the columns' transforms between the two.
#[inline(always)]
fn input_transform<const SPAN: usize>(
    d: &[Lanes; MOST_POINTS],
    t: &mut [Lanes; MOST_POINTS],
    v: &mut [Lanes; MOST_POINTS],
) {
    for c in 0..SPAN {
        for l in 0..LANES {
            let at = |i: usize| d[c + i * SPAN][l];
            let mut put = |i: usize, value: f32| t[c + i * SPAN][l] = value;
            input_1d::<SPAN>(at, &mut put);
        }
    }
    for k in 0..SPAN {
        for l in 0..LANES {
            let at = |i: usize| t[k * SPAN + i][l];
            let mut put = |i: usize, value: f32| v[k * SPAN + i][l] = value;
            input_1d::<SPAN>(at, &mut put);
        }
    }
}

/// `B^T d` of one line of `SPAN` values, `at(0..SPAN)`, into
/// `put(0..SPAN)`: row `j` of `B^T` holds the coefficients of the
/// product of `(x - b)` over the finite points `b` but the `j`-th, the
/// last row those of the product over them all.
#[inline(always)]
fn input_1d<const SPAN: usize>(at: impl Fn(usize) -> f32, put: &mut impl FnMut(usize, f32)) {
    if SPAN == 4 {
        let (d0, d1, d2, d3) = (at(0), at(1), at(2), at(3));
        put(0, d2 - d0);
        put(1, d1 + d2);
        put(2, d2 - d1);
        put(3, d3 - d1);
    } else if SPAN == 6 {
        let (two, four, five) = (2.0f32, 4.0f32, 5.0f32);
        let (d0, d1, d2, d3, d4, d5) = (at(0), at(1), at(2), at(3), at(4), at(5));
        put(0, four * d0 - five * d2 + d4);
        put(1, d3 + d4 - four * (d1 + d2));
        put(2, four * (d1 - d2) + d4 - d3);
        put(3, two * (d3 - d1) + d4 - d2);
        put(4, two * (d1 - d3) + d4 - d2);
        put(5, four * d1 - five * d3 + d5);
    } else {
        // Points 0, 1, -1, 2, -2, 1/2, -1/2: each pair's rows share their
        // odd and even parts.
        let (d0, d1, d2, d3, d4, d5, d6, d7) =
            (at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
        let (half, quarter, five4, five2, five, twenty1) =
            (0.5f32, 0.25f32, 1.25f32, 2.5f32, 5.0f32, 5.25f32);
        let seventeen4 = 4.25f32;
        put(0, d6 - d0 + twenty1 * (d2 - d4));
        let (odd, even) = (d1 + d5 - seventeen4 * d3, d2 + d6 - seventeen4 * d4);
        put(1, even + odd);
        put(2, even - odd);
        let (odd, even) = (
            half * d1 - five2 * d3 + 2.0 * d5,
            quarter * d2 - five4 * d4 + d6,
        );
        put(3, even + odd);
        put(4, even - odd);
        let (odd, even) = (2.0 * d1 - five2 * d3 + half * d5, 4.0 * d2 - five * d4 + d6);
        put(5, even + odd);
        put(6, even - odd);
        put(7, d7 - d1 + twenty1 * (d3 - d5));
    }
}

/// `A^T m A` of each lane's `SPAN x SPAN` products: Winograd's output
/// transform to the `OUT x OUT` tile, point `row * OUT + column`. Row
/// `i` of `A^T` is each finite point to the power `i` (0, 1, -1, 2, -2,
/// 1/2, -1/2), and 1 for infinity in the last row. `t` holds `A^T m`
/// between the two.
#[inline(always)]
fn output_transform<const SPAN: usize, const OUT: usize>(
    m: &[Lanes; MOST_POINTS],
    t: &mut [Lanes; MOST_TILE * MOST_SPAN],
    y: &mut [Lanes; MOST_TILE * MOST_TILE],
) {
    // Down each column (A^T m, OUT x SPAN), then along each row of that.
    for c in 0..SPAN {
        for l in 0..LANES {
            let at = |i: usize| m[i * SPAN + c][l];
            let mut put = |i: usize, v: f32| t[i * SPAN + c][l] = v;
            output_1d::<SPAN, OUT>(at, &mut put);
        }
    }
    for i in 0..OUT {
        for l in 0..LANES {
            let at = |j: usize| t[i * SPAN + j][l];
            let mut put = |j: usize, v: f32| y[i * OUT + j][l] = v;
            output_1d::<SPAN, OUT>(at, &mut put);
        }
    }
}

/// `A^T` of one line of `SPAN` products, `at(0..SPAN)`, into
/// `put(0..OUT)`: output `i` weighs the products at points 1, 2 and 1/2
/// by their `i`-th powers, the pairs of opposite points together
/// (their sums for even powers, their differences for odd ones).
#[inline(always)]
fn output_1d<const SPAN: usize, const OUT: usize>(
    at: impl Fn(usize) -> f32,
    put: &mut impl FnMut(usize, f32),
) {
    let (sum12, dif12) = (at(1) + at(2), at(1) - at(2));
    let (sum34, dif34) = if SPAN > 4 {
        (at(3) + at(4), at(3) - at(4))
    } else {
        (0.0, 0.0)
    };
    let (sum56, dif56) = if SPAN == 8 {
        (at(5) + at(6), at(5) - at(6))
    } else {
        (0.0, 0.0)
    };
    for i in 0..OUT {
        // 2^i and 2^-i, exact.
        let (up, down) = ((1u32 << i) as f32, 1.0 / (1u32 << i) as f32);
        let mut v = match i {
            0 => at(0) + sum12 + sum34,
            _ if i % 2 == 0 => sum12 + up * sum34,
            _ => dif12 + up * dif34,
        };
        if SPAN == 8 {
            v += down * if i % 2 == 0 { sum56 } else { dif56 };
        }
        if i == OUT - 1 {
            v += at(SPAN - 1);
        }
        put(i, v);
    }
}

/// A buffer written by the cores at once in runs no two share: the
/// output blob (each core writes only the pixels of its own tiles, and
/// tiles never share a pixel), or a block's transformed input (each core
/// its own channels).
struct Output<'a> {
    ptr: *mut f32,
    len: usize,
    /// From one image's output to the next's.
    image_stride: usize,
    _borrow: PhantomData<&'a mut [f32]>,
}

// SAFETY: `Output` only hands out runs of pixels that one thread alone
// writes (the tiles' pixels are disjoint), so sharing it is sharing `&mut
// [f32]` cut into disjoint pieces.
unsafe impl Sync for Output<'_> {}

impl<'a> Output<'a> {
    fn new(y: &'a mut [f32], image_stride: usize) -> Self {
        Output {
            ptr: y.as_mut_ptr(),
            len: y.len(),
            image_stride,
            _borrow: PhantomData,
        }
    }

    /// `y[at..at + len]`, checked to lie inside the output.
    ///
    /// # Safety
    /// No other reference to these pixels lives while the run does: they
    /// belong to the caller's tiles, and the caller holds no other run
    /// that overlaps this one.
    #[allow(clippy::mut_from_ref)]
    unsafe fn run(&self, at: usize, len: usize) -> &mut [f32] {
        assert!(
            at.checked_add(len).is_some_and(|end| end <= self.len),
            "a Winograd tile wrote past the output"
        );
        // SAFETY: in bounds (checked above); the borrow of `y` is held
        // for 'a, and no one else uses these pixels meanwhile (the
        // caller's promise).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_relu(bias: &[f32]) -> Finish<'_, f32> {
        Finish {
            bias,
            activation: None,
        }
    }

    /// Caffe's sum, written out over coordinates, in f64.
    fn direct(g: &ConvGeometry, x: &[f32], w: &[f32], b: &[f32]) -> Vec<f64> {
        let mut y = vec![0.0; g.batch * g.channels_out * g.oh * g.ow];
        for n in 0..g.batch {
            for co in 0..g.channels_out {
                for r in 0..g.oh {
                    for q in 0..g.ow {
                        let mut s = b[co] as f64;
                        let k = g.kernel[0];
                        for ci in 0..g.channels_in {
                            for ki in 0..k {
                                for kj in 0..k {
                                    let (iy, ix) = (r + ki, q + kj);
                                    if iy < g.pad[0] || ix < g.pad[1] {
                                        continue;
                                    }
                                    let (iy, ix) = (iy - g.pad[0], ix - g.pad[1]);
                                    if iy >= g.h || ix >= g.w {
                                        continue;
                                    }
                                    s += x[((n * g.channels_in + ci) * g.h + iy) * g.w + ix] as f64
                                        * w[((co * g.channels_in + ci) * k + ki) * k + kj] as f64;
                                }
                            }
                        }
                        y[((n * g.channels_out + co) * g.oh + r) * g.ow + q] = s;
                    }
                }
            }
        }
        y
    }

    fn geometry(
        batch: usize,
        cin: usize,
        cout: usize,
        h: usize,
        w: usize,
        pad: [usize; 2],
    ) -> ConvGeometry {
        windowed(3, batch, cin, cout, h, w, pad)
    }

    /// [`geometry`] of a `k x k` window.
    fn windowed(
        k: usize,
        batch: usize,
        cin: usize,
        cout: usize,
        h: usize,
        w: usize,
        pad: [usize; 2],
    ) -> ConvGeometry {
        ConvGeometry {
            batch,
            channels_in: cin,
            channels_out: cout,
            h,
            w,
            oh: ConvGeometry::output_size(h, k, 1, pad[0], 1),
            ow: ConvGeometry::output_size(w, k, 1, pad[1], 1),
            kernel: [k, k],
            stride: [1, 1],
            pad,
            dilation: [1, 1],
        }
    }

    /// Whether an f32 pass over `g` takes Winograd where the 8-point
    /// variants are allowed.
    fn taken(g: ConvGeometry) -> bool {
        g.winograd_tile::<f32>(true).is_some()
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                (((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) % 2001) as f32
                    / 1000.0
                    - 1.0
            })
            .collect()
    }

    #[test]
    fn matches_the_direct_sum_on_every_edge_case() {
        // Planes whose outputs fill whole tiles or leave 1-3 columns and
        // rows over; padding 0, 1 and 2; blocks of one tile to many.
        for (batch, cin, cout, h, w, pad) in [
            (1, 8, 8, 6, 6, [0, 0]),
            (2, 9, 11, 7, 13, [1, 1]),
            (1, 16, 24, 23, 23, [0, 0]),
            (3, 8, 16, 10, 5, [2, 1]),
            (1, 32, 64, 23, 23, [1, 0]),
            (2, 64, 8, 3, 3, [1, 1]),
        ] {
            // Any geometry computes right, in either tile; `winograd_tile`
            // only says where it pays.
            for tile in [NARROW_TILE, TILE, WIDE_TILE] {
                matches_the_direct_sum(&geometry(batch, cin, cout, h, w, pad), tile, 2);
            }
        }
    }

    #[test]
    fn six_by_six_and_two_by_two_tiles_match_the_direct_sum() {
        // F(6x6, 3x3): planes of whole tiles and of 1-5 columns and rows
        // over; F(2x2, 3x3): of whole tiles and of a row and column over
        // (128 -> 160: 16 points of 20480 channel pairs stream). Cached
        // and streamed weights, one core and two.
        let six: &[_] = &[
            (1, 16, 16, 8, 8, [0, 0]),
            (2, 9, 11, 11, 14, [1, 1]),
            (1, 32, 64, 23, 23, [0, 0]),
            (1, 64, 128, 28, 28, [1, 1]),
        ];
        let two: &[_] = &[
            (1, 16, 16, 8, 8, [1, 1]),
            (2, 9, 11, 7, 6, [0, 1]),
            (1, 128, 160, 7, 7, [1, 1]),
            (3, 128, 160, 5, 4, [1, 0]),
        ];
        for (tile, cases) in [(WIDE_TILE, six), (NARROW_TILE, two)] {
            for &(batch, cin, cout, h, w, pad) in cases {
                let g = geometry(batch, cin, cout, h, w, pad);
                for cores in [1, 2] {
                    matches_the_direct_sum(&g, tile, cores);
                }
            }
        }
    }

    #[test]
    fn two_by_two_tiles_where_the_weights_read_costs_most() {
        // Streamed weights serving few tiles a reading take F(2x2, 3x3):
        // ResNet-50's res5 at batch 1 (7 x 7: 4 tiles of F(4x4, 3x3)),
        // MobileNet-YOLOv2 lite's conv21 (256 -> 1024 at 10 x 10, 9),
        // 256 -> 256 at 8 x 8, GoogLeNet's inception_5b/3x3 (192 -> 384
        // at 7 x 7). More tiles a reading keep F(4x4, 3x3):
        // 256 -> 256 and 512 -> 512 at 12 x 12 (9 tiles, but 4 times as
        // many of F(2x2)'s), res4 at 14 x 14 (16 tiles; level, measured),
        // res5 at batch 8 (32 tiles), darknet19's 256 -> 512 at 26 x 26.
        // Cached weights keep F(4x4, 3x3) however few their tiles
        // (O-Net's conv3: 64 -> 64 at 10 x 10), as do those L3 keeps
        // (SqueezeNet's fire9/expand3x3: 64 -> 256 at 13 x 13, 16 tiles;
        // 128 -> 160 at 7 x 7, 4) and 5x5 windows.
        for cores in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(cores)
                .build()
                .unwrap();
            pool.install(|| {
                let tile = |g: ConvGeometry| g.winograd_tile::<f32>(true);
                for narrow in [
                    geometry(1, 512, 512, 7, 7, [1, 1]),
                    geometry(1, 256, 1024, 10, 10, [1, 1]),
                    geometry(1, 256, 256, 8, 8, [1, 1]),
                    geometry(1, 192, 384, 7, 7, [1, 1]),
                ] {
                    assert_eq!(tile(narrow), Some(NARROW_TILE), "{narrow:?}");
                    // F(2x2, 3x3) rounds less: no reason to keep it from
                    // a TRAIN-phase net.
                    assert_eq!(narrow.winograd_tile::<f32>(false), Some(NARROW_TILE));
                }
                for four in [
                    geometry(1, 256, 256, 12, 12, [1, 1]),
                    geometry(1, 512, 512, 12, 12, [1, 1]),
                    geometry(1, 256, 256, 14, 14, [1, 1]),
                    geometry(8, 512, 512, 7, 7, [1, 1]),
                    geometry(1, 256, 512, 26, 26, [1, 1]),
                    geometry(1, 64, 64, 10, 10, [0, 0]),
                    geometry(1, 64, 256, 13, 13, [1, 1]),
                    geometry(1, 128, 160, 7, 7, [1, 1]),
                ] {
                    assert_eq!(tile(four), Some(TILE), "{four:?}");
                }
                assert_eq!(tile(windowed(5, 1, 512, 512, 7, 7, [2, 2])), Some(TILE));
            });
        }
    }

    #[test]
    fn five_by_five_matches_the_direct_sum() {
        // F(4x4, 5x5): odd and even planes, padding 0 to 2 (CaffeNet's
        // conv2 pads 2), cached and streamed weights, one core and two.
        for (batch, cin, cout, h, w, pad) in [
            (1, 8, 8, 6, 6, [0, 0]),
            (2, 9, 11, 7, 12, [2, 1]),
            (1, 48, 128, 27, 27, [2, 2]),
            (2, 96, 80, 9, 10, [1, 2]),
        ] {
            let g = windowed(5, batch, cin, cout, h, w, pad);
            for cores in [1, 2] {
                matches_the_direct_sum(&g, TILE, cores);
            }
        }
    }

    /// `forward` in output tiles of side `tile` on `cores` cores against
    /// Caffe's sum, within the rounding of the window's cin products of
    /// values in [-1, 1].
    fn matches_the_direct_sum(g: &ConvGeometry, tile: usize, cores: usize) {
        let (cin, cout) = (g.channels_in, g.channels_out);
        let x = values(g.batch * cin * g.h * g.w, 1);
        let taps = g.kernel[0] * g.kernel[1];
        let wt = values(cout * cin * taps, 2);
        let b = values(cout, 3);
        let want = direct(g, &x, &wt, &b);
        let mut y = vec![f32::NAN; want.len()];
        let per_image = cout * g.oh * g.ow;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(cores)
            .build()
            .unwrap();
        pool.install(|| {
            let mut s = WinogradScratch::default();
            forward(
                g,
                tile,
                1,
                &mut s,
                1,
                &x,
                &wt,
                no_relu(&b),
                (&mut y, per_image),
            )
            .unwrap();
        });
        let scale = (taps * cin) as f64;
        for (i, (&got, &want)) in y.iter().zip(&want).enumerate() {
            assert!(
                (got as f64 - want).abs() <= 2e-6 * scale,
                "{g:?} on {cores} cores: output {i} is {got}, want {want}"
            );
        }
    }

    #[test]
    fn each_group_matches_its_direct_sum() {
        // Caffe's `group`: group i reads input channels i C/G.. of each
        // image and writes outputs i M/G..; cached and streamed weights,
        // a batch of 3 so that each group's images lie apart.
        for (groups, batch, cin, cout, side) in [(2, 3, 16, 24, 9), (3, 2, 96, 80, 13)] {
            let g = geometry(batch, cin, cout, side, side, [1, 1]);
            let (plane, out_plane) = (side * side, g.oh * g.ow);
            let x = values(batch * groups * cin * plane, 1);
            let wt = values(groups * cout * cin * 9, 2);
            let b = values(groups * cout, 3);
            let mut y = vec![f32::NAN; batch * groups * cout * out_plane];
            let mut s = WinogradScratch::default();
            let stride = groups * cout * out_plane;
            forward(
                &g,
                TILE,
                groups,
                &mut s,
                1,
                &x,
                &wt,
                no_relu(&b),
                (&mut y, stride),
            )
            .unwrap();
            for gi in 0..groups {
                // The group's channels alone, as an ungrouped layer's.
                let xg: Vec<f32> = (0..batch)
                    .flat_map(|n| &x[((n * groups + gi) * cin) * plane..][..cin * plane])
                    .copied()
                    .collect();
                let wg = &wt[gi * cout * cin * 9..][..cout * cin * 9];
                let want = direct(&g, &xg, wg, &b[gi * cout..][..cout]);
                for n in 0..batch {
                    let got = &y[((n * groups + gi) * cout) * out_plane..][..cout * out_plane];
                    let want = &want[n * cout * out_plane..][..cout * out_plane];
                    for (i, (&got, &want)) in got.iter().zip(want).enumerate() {
                        assert!(
                            (got as f64 - want).abs() <= 2e-6 * (9 * cin) as f64,
                            "group {gi} of {groups}, image {n}: output {i} is {got}, want {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn images_written_at_a_stride_keep_their_bits() {
        // A Concat's top folded into the Convolutions before it: image n
        // at y[n * stride..], the values between left as they were; one
        // group and two, cached and streamed weights, F(4x4) and F(6x6).
        for (groups, batch, cin, cout, side, tile) in [
            (1, 3, 16, 24, 11, TILE),
            (2, 3, 16, 24, 9, TILE),
            (1, 2, 16, 32, 20, WIDE_TILE),
            (1, 2, 256, 256, 13, TILE),
        ] {
            let g = geometry(batch, cin, cout, side, side, [1, 1]);
            let per_image = groups * cout * g.oh * g.ow;
            let x = values(batch * groups * cin * side * side, 1);
            let (wt, b) = (values(groups * cout * cin * 9, 2), values(groups * cout, 3));
            let run = |y: &mut [f32], stride: usize| {
                let mut s = WinogradScratch::default();
                forward(
                    &g,
                    tile,
                    groups,
                    &mut s,
                    1,
                    &x,
                    &wt,
                    no_relu(&b),
                    (y, stride),
                )
                .unwrap();
            };
            let mut want = vec![f32::NAN; batch * per_image];
            run(&mut want, per_image);
            let stride = per_image + 7;
            let mut got = vec![f32::NAN; batch * stride];
            run(&mut got, stride);
            for (n, image) in want.chunks_exact(per_image).enumerate() {
                let (run, gap) = got[n * stride..][..stride].split_at(per_image);
                let same = run
                    .iter()
                    .zip(image)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{groups} groups, {side} x {side}: image {n}");
                assert!(gap.iter().all(|v| v.is_nan()), "written past image {n}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "a Winograd pass's images of 384 values each, 383 apart")]
    fn images_closer_than_their_size_are_refused() {
        let g = geometry(2, 16, 24, 4, 4, [1, 1]);
        let (x, wt, b) = (
            values(2 * 16 * 16, 1),
            values(24 * 16 * 9, 2),
            values(24, 3),
        );
        let mut y = vec![0.0; 2 * 384];
        let mut s = WinogradScratch::default();
        forward(&g, TILE, 1, &mut s, 1, &x, &wt, no_relu(&b), (&mut y, 383)).unwrap();
    }

    #[test]
    fn the_cores_do_not_change_the_bits() {
        // However a pass cuts its tiles into blocks, each tile's sums are
        // the same: training on 2 cores and on 3 stays on one trajectory
        // as far as the forward pass goes (LeNet's conv2 at batch 64).
        let g = windowed(5, 64, 20, 50, 12, 12, [0, 0]);
        let x = values(g.batch * 20 * 144, 1);
        let (wt, b) = (values(50 * 20 * 25, 2), values(50, 3));
        let run = |cores: usize| {
            let mut y = vec![0.0; g.batch * 50 * 64];
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(cores)
                .build()
                .unwrap();
            pool.install(|| {
                let mut s = WinogradScratch::default();
                forward(
                    &g,
                    TILE,
                    1,
                    &mut s,
                    1,
                    &x,
                    &wt,
                    no_relu(&b),
                    (&mut y, 50 * 64),
                )
                .unwrap();
            });
            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let one = run(1);
        for cores in [2, 3] {
            assert!(one == run(cores), "{cores} cores differ from one");
        }
    }

    #[test]
    fn streamed_weights_match_the_direct_sum_on_any_cores() {
        // Weights beyond CACHED_WEIGHTS: the block's output channels cut
        // across the cores in panels (80 outputs in 3 panels, the last
        // cut at 16 of them; 96 in 3 among 3 cores).
        for (cores, batch, cin, cout, h, w) in [
            (1, 2, 96, 80, 10, 9),
            (2, 2, 96, 80, 10, 9),
            (3, 1, 90, 96, 13, 13),
        ] {
            let g = geometry(batch, cin, cout, h, w, [1, 1]);
            assert!(Tiling::of(&g, TILE, 1).streamed);
            matches_the_direct_sum(&g, TILE, cores);
        }
    }

    #[test]
    fn taken_where_it_pays() {
        // How a pass cuts its tiles into blocks follows the cores: two,
        // as on the machines these were measured on.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        pool.install(|| {
            // O-Net's conv2 and conv3, ResNet-50's res3 3x3 at batch 1.
            assert!(taken(geometry(1, 32, 64, 23, 23, [0, 0])));
            assert!(taken(geometry(1, 64, 64, 10, 10, [0, 0])));
            assert!(taken(geometry(1, 128, 128, 28, 28, [1, 1])));
            // f64 stays exact; too few channels (an RGB image's first layer,
            // P-Net's 10 -> 16); R-Net's 9x9 outputs (tiles
            // 44% wasted); 512 -> 512 at 6 x 6 (36 outputs for 38 MB of
            // transformed weights read, fewer than two cores need).
            assert!(
                geometry(1, 32, 64, 23, 23, [0, 0])
                    .winograd_tile::<f64>(true)
                    .is_none()
            );
            assert!(!taken(geometry(1, 3, 64, 23, 23, [0, 0])));
            assert!(!taken(geometry(1, 10, 16, 30, 30, [0, 0])));
            assert!(taken(geometry(1, 16, 16, 48, 48, [0, 0])));
            assert!(!taken(geometry(1, 28, 48, 11, 11, [0, 0])));
            assert!(!taken(geometry(1, 512, 512, 6, 6, [1, 1])));
            // Streamed weights read once a pass: res5 at batch 1, 2, 4
            // and 8 (49 outputs and more), MobileNet-YOLOv2 lite's conv21
            // (256 -> 1024 at 10 x 10), res4 at batch 1 (16 tiles), darknet19's 256 -> 512 at 26 x
            // 26 and 128 -> 256 at 52 x 52, YOLOv3-tiny's 512 -> 1024 at
            // 13 x 13 (a third of its tiles' outputs past the plane, but
            // 2.6x fewer products than im2col's).
            assert!(taken(geometry(1, 512, 512, 7, 7, [1, 1])));
            assert!(taken(geometry(2, 512, 512, 7, 7, [1, 1])));
            assert!(taken(geometry(4, 512, 512, 7, 7, [1, 1])));
            assert!(taken(geometry(8, 512, 512, 7, 7, [1, 1])));
            assert!(taken(geometry(1, 256, 1024, 10, 10, [1, 1])));
            assert!(taken(geometry(1, 256, 256, 14, 14, [1, 1])));
            assert!(taken(geometry(1, 256, 512, 26, 26, [1, 1])));
            assert!(taken(geometry(1, 128, 256, 52, 52, [1, 1])));
            assert!(taken(geometry(1, 512, 1024, 13, 13, [1, 1])));
            // 5x5 windows: a group of CaffeNet's conv2 and GoogLeNet's
            // inception_3b/5x5 and inception_5b/5x5 at 7 x 7 take F(4x4,
            // 5x5); an RGB image's first layer does not.
            assert!(taken(windowed(5, 1, 48, 128, 31, 31, [2, 2])));
            assert!(taken(windowed(5, 1, 32, 96, 32, 32, [2, 2])));
            assert!(!taken(windowed(5, 1, 3, 32, 36, 36, [2, 2])));
            assert!(taken(windowed(5, 1, 48, 128, 7, 7, [2, 2])));
            let mut strided = geometry(1, 32, 64, 23, 23, [0, 0]);
            strided.stride = [2, 2];
            assert!(!taken(strided));
        });
        // Streamed weights want more outputs a reading the more cores
        // share the memory: res5 at batch 1 (49 outputs) on one core, not
        // on four; conv21's 100 outputs on four, not on eight.
        let on = |cores: usize, g: ConvGeometry| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(cores)
                .build()
                .unwrap();
            pool.install(|| taken(g))
        };
        assert!(on(1, geometry(1, 512, 512, 7, 7, [1, 1])));
        assert!(!on(4, geometry(1, 512, 512, 7, 7, [1, 1])));
        assert!(on(4, geometry(1, 256, 1024, 10, 10, [1, 1])));
        assert!(!on(8, geometry(1, 256, 1024, 10, 10, [1, 1])));
        assert!(on(8, geometry(4, 512, 512, 7, 7, [1, 1])));
    }

    #[test]
    fn six_by_six_tiles_where_they_waste_fewer_products() {
        // O-Net's conv2 (21 x 21 outputs: 16 tiles of 6 x 6 against 36
        // of 4 x 4) and darknet19's 32 -> 64 at 208 x 208 (19.5% fewer
        // products) take F(6x6, 3x3) where the 8-point transforms are
        // allowed, F(4x4, 3x3) where not; darknet19's 128 -> 256 at 52 x
        // 52 (15% fewer, but too many channels for its rounding),
        // ResNet-50's res3 3x3 (28 x 28, 9% fewer), 13 x 13 and 14 x 14
        // planes (as many either way) and 7 x 7 ones (78% more) keep
        // F(4x4, 3x3); a 5x5 window takes none without them. Weights
        // that do not stay in cache take 6x6 tiles where their outputs
        // are enough (32 -> 512 at 18 x 18: 9 tiles, 324 outputs; one
        // Zen 4 core / two, 2026-12-06, ms: 0.36 / 0.19 against 4x4
        // tiles' 0.50 / 0.27).
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        pool.install(|| {
            let tile = |g: ConvGeometry, wide| g.winograd_tile::<f32>(wide);
            assert_eq!(
                tile(geometry(1, 32, 64, 23, 23, [0, 0]), true),
                Some(WIDE_TILE)
            );
            assert_eq!(tile(geometry(1, 32, 64, 23, 23, [0, 0]), false), Some(TILE));
            assert_eq!(
                tile(geometry(1, 32, 64, 208, 208, [1, 1]), true),
                Some(WIDE_TILE)
            );
            assert_eq!(
                tile(geometry(1, 32, 64, 208, 208, [1, 1]), false),
                Some(TILE)
            );
            assert_eq!(
                tile(geometry(1, 128, 256, 52, 52, [1, 1]), true),
                Some(TILE)
            );
            assert_eq!(
                tile(geometry(1, 128, 128, 28, 28, [1, 1]), true),
                Some(TILE)
            );
            assert_eq!(tile(geometry(1, 64, 256, 13, 13, [1, 1]), true), Some(TILE));
            assert_eq!(
                tile(geometry(1, 256, 256, 14, 14, [1, 1]), true),
                Some(TILE)
            );
            assert_eq!(tile(geometry(8, 512, 512, 7, 7, [1, 1]), true), Some(TILE));
            assert_eq!(
                tile(geometry(1, 32, 512, 18, 18, [1, 1]), true),
                Some(WIDE_TILE)
            );
            assert_eq!(tile(windowed(5, 1, 48, 128, 31, 31, [2, 2]), false), None);
        });
    }

    #[test]
    fn an_empty_batch_has_nothing_to_tile() {
        // A net's input of batch 0 (fuzzing found it dividing by zero).
        let g = geometry(0, 16, 16, 13, 12, [1, 1]);
        assert!(taken(g));
        let (w, b) = (values(16 * 16 * 9, 1), vec![0.0; 16]);
        let mut s = WinogradScratch::default();
        forward(
            &g,
            TILE,
            1,
            &mut s,
            1,
            &[],
            &w,
            no_relu(&b),
            (&mut [], 16 * 13 * 12),
        )
        .unwrap();
    }

    #[test]
    fn the_weights_transform_follows_their_stamp() {
        let g = geometry(1, 8, 8, 8, 8, [1, 1]);
        let x = values(8 * 64, 4);
        let (w1, w2, b) = (values(8 * 8 * 9, 5), values(8 * 8 * 9, 6), vec![0.0; 8]);
        let mut s = WinogradScratch::default();
        let (mut first, mut again, mut other) = (vec![0.0; 512], vec![0.0; 512], vec![0.0; 512]);
        let mut run = |stamp: u64, w: &[f32], y: &mut [f32]| {
            forward(&g, TILE, 1, &mut s, stamp, &x, w, no_relu(&b), (y, 512)).unwrap();
        };
        run(7, &w1, &mut first);
        // Same stamp: the transform kept (new weights unseen).
        run(7, &w2, &mut again);
        assert_eq!(first, again);
        // A new stamp: the new weights used.
        run(8, &w2, &mut other);
        let want = direct(&g, &x, &w2, &b);
        assert!(
            other
                .iter()
                .zip(&want)
                .all(|(&a, &b)| (a as f64 - b).abs() < 1e-4)
        );
    }
}
