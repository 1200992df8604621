//! Winograd's minimal filtering F(4x4, 3x3) (Lavin and Gray, "Fast
//! Algorithms for Convolutional Neural Networks", 2015) for the CPU
//! forward pass of 3x3, stride-1 convolutions: SqueezeNet's, GoogLeNet's
//! and ResNet's 3x3 layers, MTCNN's.
//!
//! Each 6x6 input tile (overlapping by two) and each 3x3 kernel are carried
//! into a 36-point domain where the convolution becomes a product point by
//! point, and back to a 4x4 output tile. Summed over the input channels,
//! the products are 36 gemms of `(cout x cin)` by `(cin x tiles)`: 2.25
//! multiply-adds per output and input channel where im2col's gemm does 9.
//!
//! The results differ from im2col's in the last bits (the transforms add
//! and scale before multiplying): within 1e-6 of the magnitudes involved
//! on trained weights. Only f32 passes come here; f64 passes, which the
//! gradient checks use as the exact reference, keep im2col, as do the
//! backward passes.
//!
//! The tiles are cut into blocks, each transformed, multiplied and
//! transformed back by one core while its buffers stay in that core's L2;
//! inside a block, 16 channels of a tile go side by side through the
//! transforms, one per SIMD lane.

use std::marker::PhantomData;

use blob_kernels::cpu::{self, Transpose};
use blob_runtime::{MathElement, Precision};

use super::cpu::ConvGeometry;
use crate::layer::{Result, ensure};

/// Output tile side.
const TILE: usize = 4;
/// Input tile side: `TILE + 3 - 1`.
const SPAN: usize = 6;
/// Points of the transformed domain.
const POINTS: usize = SPAN * SPAN;
/// Channels transformed side by side, one per lane of an AVX-512 register.
const LANES: usize = 16;
/// Tiles a block holds at least (where there are as many): the gemm
/// kernel's rows.
const MIN_BLOCK: usize = 8;
/// One block's transformed input and products, in values: 512 KiB of
/// f32, half a Zen 5 core's L2.
const BLOCK_VALUES: usize = 1 << 17;
/// Channels, in and out, below which im2col stays faster: the output
/// transform costs the same per output channel whatever the depth, and
/// a shallow gemm is cheap. One thread, same runs, µs, Winograd against
/// im2col: 8 -> 32 on 48 x 48 181 / 113, 12 -> 32 203 / 166, 16 -> 32
/// 220 / 264, 16 -> 16 161 / 173; P-Net's conv2 at 30 x 30 (10 -> 16)
/// 47 / 27.
const MIN_CHANNELS: usize = 16;

/// Tiles a pass needs to reuse its transformed weights enough, when they
/// do not stay in cache: each weight is read once per block of tiles and
/// used once per tile, so with few tiles (ResNet-50's last 3x3 layers at
/// batch 1: 4 tiles, 38 MB of transformed weights) the pass waits on
/// memory; measured 2x-4.5x slower than im2col there, and 2x faster at 49
/// tiles (`docs/BENCHMARKS.md`, 2026-11-25).
const MIN_TILES: usize = 32;
/// Transformed weights, in values, that stay in a core's L2 between
/// passes (1 MiB of f32): with these, even a few tiles pay (O-Net's
/// conv3, 4 tiles of 64 x 64 channels, 1.5x).
const CACHED_WEIGHTS: usize = 1 << 18;

/// `G`, the kernel's transform (6x3), in the points 0, 1, -1, 2, -2, inf.
const G: [[f64; 3]; SPAN] = [
    [1.0 / 4.0, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

impl ConvGeometry {
    /// Whether the forward pass over `T` goes through Winograd: a 3x3
    /// window at stride 1 without dilation, f32, and enough channels on
    /// both sides for the transforms to pay.
    pub fn suits_winograd<T: MathElement>(&self) -> bool {
        T::PRECISION == Precision::F32
            && self.kernel == [3, 3]
            && self.stride == [1, 1]
            && self.dilation == [1, 1]
            && self.channels_in >= MIN_CHANNELS
            && self.channels_out >= MIN_CHANNELS
            && self.oh * self.ow > 0
            // The tiles must cover at most a third more than the outputs:
            // on MTCNN's small planes (3x3 and 9x9 outputs in 1 and 9
            // tiles, 44% of each wasted) the transforms cost more than
            // the products they save.
            && self.oh * self.ow * 4
                >= 3 * TILE * TILE * self.oh.div_ceil(TILE) * self.ow.div_ceil(TILE)
            && (self.batch * self.oh.div_ceil(TILE) * self.ow.div_ceil(TILE) >= MIN_TILES
                || POINTS * self.channels_in * self.channels_out <= CACHED_WEIGHTS)
    }
}

/// What a Winograd convolution keeps between passes: the weights'
/// transform (remade when the weights change) and each core's block
/// buffers (grow-only).
#[derive(Default)]
pub(crate) struct WinogradScratch<T> {
    /// `U[point][ci][co]`: each point's `(cin x cout)` matrix.
    weights: Vec<T>,
    /// The weights' write stamp and the channels `weights` was made for.
    made_from: Option<(u64, usize, usize)>,
    parts: Vec<BlockBuffers<T>>,
}

/// One core's buffers: a block's transformed input `V[point][tile][ci]`
/// and products `M[point][tile][co]`.
#[derive(Default)]
struct BlockBuffers<T> {
    input: Vec<T>,
    products: Vec<T>,
}

/// How the tiles of a pass are cut.
#[derive(Clone, Copy, Debug)]
struct Tiling {
    /// Tiles down and across one output plane.
    down: usize,
    across: usize,
    /// Tiles in the whole batch.
    tiles: usize,
    /// Tiles per block (the last block may hold fewer).
    per_block: usize,
    /// Blocks per core's part.
    blocks_per_part: usize,
}

impl Tiling {
    fn of(g: &ConvGeometry) -> Tiling {
        let (down, across) = (g.oh.div_ceil(TILE), g.ow.div_ceil(TILE));
        let tiles = g.batch * down * across;
        let most = (BLOCK_VALUES / (POINTS * (g.channels_in + g.channels_out))).max(MIN_BLOCK);
        // A block per core where there are enough tiles for each core to
        // fill the gemm kernel's rows.
        let wanted = cpu::cores().min(tiles.div_ceil(MIN_BLOCK)).max(1);
        let blocks = tiles.div_ceil(most).max(wanted);
        let per_block = tiles.div_ceil(blocks).max(1);
        let blocks = tiles.div_ceil(per_block);
        let parts = cpu::cores().clamp(1, blocks.max(1));
        Tiling {
            down,
            across,
            tiles,
            per_block,
            blocks_per_part: blocks.div_ceil(parts).max(1),
        }
    }

    /// Tile `t`'s image and the top-left output pixel it covers.
    fn origin(&self, t: usize) -> (usize, usize, usize) {
        let per_image = self.down * self.across;
        let (image, at) = (t / per_image, t % per_image);
        (image, at / self.across * TILE, at % self.across * TILE)
    }
}

/// `y = conv(x) + bias` through F(4x4, 3x3) for a `g` that
/// [`suits_winograd`](ConvGeometry::suits_winograd); `weights_stamp` is
/// the weight blob's [`write_stamp`](blob_runtime::SyncedMemory::write_stamp).
pub(crate) fn forward<T: MathElement>(
    g: &ConvGeometry,
    scratch: &mut WinogradScratch<T>,
    weights_stamp: u64,
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
) -> Result<()> {
    let (cin, cout) = (g.channels_in, g.channels_out);
    if scratch.made_from != Some((weights_stamp, cin, cout)) {
        ensure(&mut scratch.weights, POINTS * cout * cin)?;
        transform_weights(cin, cout, weight, &mut scratch.weights);
        scratch.made_from = Some((weights_stamp, cin, cout));
    }
    let tiling = Tiling::of(g);
    if tiling.tiles == 0 {
        return Ok(());
    }
    let blocks = tiling.tiles.div_ceil(tiling.per_block);
    let parts = blocks.div_ceil(tiling.blocks_per_part);
    if scratch.parts.len() < parts {
        scratch.parts.resize_with(parts, BlockBuffers::default);
    }
    for b in &mut scratch.parts[..parts] {
        ensure(&mut b.input, POINTS * cin * tiling.per_block)?;
        ensure(&mut b.products, POINTS * cout * tiling.per_block)?;
    }
    let out = Output::new(&mut y[..g.batch * cout * g.oh * g.ow]);
    let (u, x) = (
        &scratch.weights[..POINTS * cout * cin],
        &x[..g.batch * cin * g.h * g.w],
    );
    cpu::on_cores(
        scratch.parts[..parts].iter_mut().enumerate(),
        |(p, buffers)| {
            for block in p * tiling.blocks_per_part..((p + 1) * tiling.blocks_per_part).min(blocks)
            {
                let first = block * tiling.per_block;
                let count = tiling.per_block.min(tiling.tiles - first);
                run_block(g, &tiling, u, x, bias, first, count, buffers, &out);
            }
        },
    );
    Ok(())
}

/// `U = G g G^T` for every (output, input) channel pair, in f64, stored
/// point-major with the outputs adjacent: `u[(point * cin + ci) * cout +
/// co]`, each point's matrix the `(cin x cout)` right side of its gemm.
fn transform_weights<T: MathElement>(cin: usize, cout: usize, weight: &[T], u: &mut [T]) {
    for co in 0..cout {
        for ci in 0..cin {
            let k = &weight[(co * cin + ci) * 9..][..9];
            // G g: 6x3.
            let mut gk = [[0.0f64; 3]; SPAN];
            for (row, gr) in gk.iter_mut().zip(&G) {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = (0..3).map(|a| gr[a] * k[a * 3 + j].to_f64()).sum();
                }
            }
            for (r, row) in gk.iter().enumerate() {
                for (c, gc) in G.iter().enumerate() {
                    let v: f64 = (0..3).map(|b| row[b] * gc[b]).sum();
                    u[((r * SPAN + c) * cin + ci) * cout + co] = T::from_f64(v);
                }
            }
        }
    }
}

/// Lanes of values: one per channel of a group of 16.
type Lanes<T> = [T; LANES];

/// Tiles `first..first + count` of the batch: input transform, the 36
/// gemms, output transform and bias, written into `out`. The transforms
/// run on 16 channels of a tile at once, one per lane; the gemms are
/// `(tiles x cin)` by `(cin x cout)`, wide enough for the gemm kernel's
/// 32 columns on every layer this takes, however few the tiles.
#[allow(clippy::too_many_arguments)]
fn run_block<T: MathElement>(
    g: &ConvGeometry,
    tiling: &Tiling,
    u: &[T],
    x: &[T],
    bias: &[T],
    first: usize,
    count: usize,
    buffers: &mut BlockBuffers<T>,
    out: &Output<'_, T>,
) {
    let (cin, cout) = (g.channels_in, g.channels_out);
    let v = &mut buffers.input[..POINTS * cin * count];
    let m = &mut buffers.products[..POINTS * cout * count];
    cpu::vectorized(
        #[inline(always)]
        || {
            let mut d = [[T::ZERO; LANES]; POINTS];
            let mut e = [[T::ZERO; LANES]; POINTS];
            for c0 in (0..cin).step_by(LANES) {
                let lanes = LANES.min(cin - c0);
                for t in 0..count {
                    let (image, oy, ox) = tiling.origin(first + t);
                    gather(g, x, image, c0, lanes, oy, ox, &mut d);
                    input_transform(&d, &mut e);
                    for (p, values) in e.iter().enumerate() {
                        copy_lanes(&mut v[(p * count + t) * cin + c0..], values, lanes);
                    }
                }
            }
        },
    );
    for p in 0..POINTS {
        cpu::gemm(
            Transpose::No,
            Transpose::No,
            count,
            cout,
            cin,
            T::ONE,
            &v[p * count * cin..][..count * cin],
            &u[p * cin * cout..][..cin * cout],
            T::ZERO,
            &mut m[p * count * cout..][..count * cout],
        );
    }
    cpu::vectorized(
        #[inline(always)]
        || {
            let mut s = [[T::ZERO; LANES]; POINTS];
            let mut o = [[T::ZERO; LANES]; TILE * TILE];
            for c0 in (0..cout).step_by(LANES) {
                let lanes = LANES.min(cout - c0);
                for t in 0..count {
                    let (image, oy, ox) = tiling.origin(first + t);
                    for (p, values) in s.iter_mut().enumerate() {
                        let from = &m[(p * count + t) * cout + c0..];
                        match from.first_chunk::<LANES>() {
                            Some(all) => *values = *all,
                            None => values[..lanes].copy_from_slice(&from[..lanes]),
                        }
                    }
                    output_transform(&s, &mut o);
                    let planes = (image * cout + c0) * g.oh * g.ow;
                    for (l, &b) in bias[c0..c0 + lanes].iter().enumerate() {
                        let plane = planes + l * g.oh * g.ow;
                        for r in 0..TILE.min(g.oh - oy) {
                            let row: [T; TILE] = std::array::from_fn(|c| o[r * TILE + c][l] + b);
                            out.write(plane + (oy + r) * g.ow + ox, &row, TILE.min(g.ow - ox));
                        }
                    }
                }
            }
        },
    );
}

/// `to[..lanes] = values[..lanes]`, a whole register's worth as one
/// move (a copy of unknown length calls `memcpy`).
#[inline(always)]
fn copy_lanes<T: Copy>(to: &mut [T], values: &Lanes<T>, lanes: usize) {
    match to.first_chunk_mut::<LANES>() {
        Some(all) if lanes == LANES => *all = *values,
        _ => to[..lanes].copy_from_slice(&values[..lanes]),
    }
}

/// The 6x6 input patch at output pixel `(oy, ox)` of channels `c0..c0 +
/// lanes` of `image`, padding read as zero: `d[row * 6 + column][lane]`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gather<T: MathElement>(
    g: &ConvGeometry,
    x: &[T],
    image: usize,
    c0: usize,
    lanes: usize,
    oy: usize,
    ox: usize,
    d: &mut [Lanes<T>; POINTS],
) {
    let plane = g.h * g.w;
    let inside = oy >= g.pad[0]
        && ox >= g.pad[1]
        && oy + SPAN <= g.h + g.pad[0]
        && ox + SPAN <= g.w + g.pad[1];
    if inside {
        let at = (image * g.channels_in + c0) * plane + (oy - g.pad[0]) * g.w + ox - g.pad[1];
        for l in 0..lanes {
            for r in 0..SPAN {
                let row = &x[at + l * plane + r * g.w..][..SPAN];
                for (c, &value) in row.iter().enumerate() {
                    d[r * SPAN + c][l] = value;
                }
            }
        }
        return;
    }
    for values in d.iter_mut() {
        values.fill(T::ZERO);
    }
    let rows =
        (0..SPAN).filter_map(|r| Some((r, (oy + r).checked_sub(g.pad[0]).filter(|&iy| iy < g.h)?)));
    for (r, iy) in rows {
        for c in 0..SPAN {
            let Some(ix) = (ox + c).checked_sub(g.pad[1]).filter(|&ix| ix < g.w) else {
                continue;
            };
            let at = (image * g.channels_in + c0) * plane + iy * g.w + ix;
            for l in 0..lanes {
                d[r * SPAN + c][l] = x[at + l * plane];
            }
        }
    }
}

/// `B^T d B` of each lane's 6x6 patch, point `row * 6 + column`:
/// Winograd's input transform, down the columns and then along the rows.
#[inline(always)]
fn input_transform<T: MathElement>(d: &[Lanes<T>; POINTS], v: &mut [Lanes<T>; POINTS]) {
    let mut t = [[T::ZERO; LANES]; POINTS];
    for c in 0..SPAN {
        input_1d(d, c, SPAN, &mut t, c, SPAN);
    }
    for k in 0..SPAN {
        input_1d(&t, k * SPAN, 1, v, k * SPAN, 1);
    }
}

/// `B^T d` along one axis: the 6 values at `from + i * step` of `d` to
/// the 6 at `to + i * step_to` of `v`.
#[inline(always)]
fn input_1d<T: MathElement>(
    d: &[Lanes<T>; POINTS],
    from: usize,
    step: usize,
    v: &mut [Lanes<T>; POINTS],
    to: usize,
    step_to: usize,
) {
    let (two, four, five) = (T::from_f64(2.0), T::from_f64(4.0), T::from_f64(5.0));
    for l in 0..LANES {
        let at = |i: usize| d[from + i * step][l];
        let (d0, d1, d2, d3, d4, d5) = (at(0), at(1), at(2), at(3), at(4), at(5));
        v[to][l] = four * d0 - five * d2 + d4;
        v[to + step_to][l] = d3 + d4 - four * (d1 + d2);
        v[to + 2 * step_to][l] = four * (d1 - d2) + d4 - d3;
        v[to + 3 * step_to][l] = two * (d3 - d1) + d4 - d2;
        v[to + 4 * step_to][l] = two * (d1 - d3) + d4 - d2;
        v[to + 5 * step_to][l] = four * d1 - five * d3 + d5;
    }
}

/// `A^T m A` of each lane's 36 products: Winograd's output transform to
/// the 4x4 tile, point `row * 4 + column`.
#[inline(always)]
fn output_transform<T: MathElement>(m: &[Lanes<T>; POINTS], y: &mut [Lanes<T>; TILE * TILE]) {
    let (two, four, eight) = (T::from_f64(2.0), T::from_f64(4.0), T::from_f64(8.0));
    // Down each column (A^T m, 4x6), then along each row of that.
    let mut t = [[T::ZERO; LANES]; TILE * SPAN];
    for c in 0..SPAN {
        for l in 0..LANES {
            let at = |i: usize| m[i * SPAN + c][l];
            let (sum12, dif12, sum34, dif34) =
                (at(1) + at(2), at(1) - at(2), at(3) + at(4), at(3) - at(4));
            t[c][l] = at(0) + sum12 + sum34;
            t[SPAN + c][l] = dif12 + two * dif34;
            t[2 * SPAN + c][l] = sum12 + four * sum34;
            t[3 * SPAN + c][l] = dif12 + eight * dif34 + at(5);
        }
    }
    for i in 0..TILE {
        for l in 0..LANES {
            let at = |j: usize| t[i * SPAN + j][l];
            let (sum12, dif12, sum34, dif34) =
                (at(1) + at(2), at(1) - at(2), at(3) + at(4), at(3) - at(4));
            y[i * TILE][l] = at(0) + sum12 + sum34;
            y[i * TILE + 1][l] = dif12 + two * dif34;
            y[i * TILE + 2][l] = sum12 + four * sum34;
            y[i * TILE + 3][l] = dif12 + eight * dif34 + at(5);
        }
    }
}

/// The output blob, written by the cores at once: each core writes only
/// the pixels of its own tiles, and tiles never share a pixel.
struct Output<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: `Output` only writes, each index from one thread alone (the
// tiles' pixels are disjoint), so sharing it is sharing `&mut [T]` cut
// into disjoint pieces.
unsafe impl<T: Send> Sync for Output<'_, T> {}

impl<'a, T> Output<'a, T> {
    fn new(y: &'a mut [T]) -> Self {
        Output {
            ptr: y.as_mut_ptr(),
            len: y.len(),
            _borrow: PhantomData,
        }
    }

    /// `y[at..at + len] = row[..len]` for `len <= TILE`; the span must
    /// belong to the caller's tiles.
    #[inline(always)]
    fn write(&self, at: usize, row: &[T; TILE], len: usize)
    where
        T: Copy,
    {
        assert!(
            len <= TILE && at.checked_add(len).is_some_and(|end| end <= self.len),
            "a Winograd tile wrote past the output"
        );
        // SAFETY: in bounds (checked above); the borrow of `y` is held for
        // 'a, and no other thread writes these indices (see `Sync` above).
        // A whole row is one fixed-size move: a copy of unknown length
        // would call `memcpy`, which costs more than the 4 values.
        unsafe {
            let to = self.ptr.add(at);
            if len == TILE {
                to.cast::<[T; TILE]>().write_unaligned(*row);
            } else {
                for (i, &v) in row[..len].iter().enumerate() {
                    to.add(i).write(v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Caffe's sum, written out over coordinates, in f64.
    fn direct(g: &ConvGeometry, x: &[f32], w: &[f32], b: &[f32]) -> Vec<f64> {
        let mut y = vec![0.0; g.batch * g.channels_out * g.oh * g.ow];
        for n in 0..g.batch {
            for co in 0..g.channels_out {
                for r in 0..g.oh {
                    for q in 0..g.ow {
                        let mut s = b[co] as f64;
                        for ci in 0..g.channels_in {
                            for ki in 0..3 {
                                for kj in 0..3 {
                                    let (iy, ix) = (r + ki, q + kj);
                                    if iy < g.pad[0] || ix < g.pad[1] {
                                        continue;
                                    }
                                    let (iy, ix) = (iy - g.pad[0], ix - g.pad[1]);
                                    if iy >= g.h || ix >= g.w {
                                        continue;
                                    }
                                    s += x[((n * g.channels_in + ci) * g.h + iy) * g.w + ix] as f64
                                        * w[((co * g.channels_in + ci) * 3 + ki) * 3 + kj] as f64;
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
        ConvGeometry {
            batch,
            channels_in: cin,
            channels_out: cout,
            h,
            w,
            oh: ConvGeometry::output_size(h, 3, 1, pad[0], 1),
            ow: ConvGeometry::output_size(w, 3, 1, pad[1], 1),
            kernel: [3, 3],
            stride: [1, 1],
            pad,
            dilation: [1, 1],
        }
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
            // Any geometry computes right; `suits_winograd` only says
            // where it pays.
            let g = geometry(batch, cin, cout, h, w, pad);
            let x = values(batch * cin * h * w, 1);
            let wt = values(cout * cin * 9, 2);
            let b = values(cout, 3);
            let want = direct(&g, &x, &wt, &b);
            let mut y = vec![f32::NAN; want.len()];
            let mut s = WinogradScratch::default();
            forward(&g, &mut s, 1, &x, &wt, &b, &mut y).unwrap();
            // Each output sums 9 cin products of values in [-1, 1].
            let scale = (9 * cin) as f64;
            for (i, (&got, &want)) in y.iter().zip(&want).enumerate() {
                assert!(
                    (got as f64 - want).abs() <= 2e-6 * scale,
                    "{batch}x{cin}x{h}x{w} -> {cout}, pad {pad:?}: output {i} is {got}, want {want}"
                );
            }
        }
    }

    #[test]
    fn taken_where_it_pays() {
        // O-Net's conv2 and conv3, ResNet-50's res3 3x3 at batch 1.
        assert!(geometry(1, 32, 64, 23, 23, [0, 0]).suits_winograd::<f32>());
        assert!(geometry(1, 64, 64, 10, 10, [0, 0]).suits_winograd::<f32>());
        assert!(geometry(1, 128, 128, 28, 28, [1, 1]).suits_winograd::<f32>());
        // f64 stays exact; too few channels (an RGB image's first layer,
        // P-Net's 10 -> 16); R-Net's 9x9 outputs (tiles
        // 44% wasted); res5 at batch 1 (4 tiles, 38 MB of weights), but
        // not at batch 8.
        assert!(!geometry(1, 32, 64, 23, 23, [0, 0]).suits_winograd::<f64>());
        assert!(!geometry(1, 3, 64, 23, 23, [0, 0]).suits_winograd::<f32>());
        assert!(!geometry(1, 10, 16, 30, 30, [0, 0]).suits_winograd::<f32>());
        assert!(geometry(1, 16, 16, 48, 48, [0, 0]).suits_winograd::<f32>());
        assert!(!geometry(1, 28, 48, 11, 11, [0, 0]).suits_winograd::<f32>());
        assert!(!geometry(1, 512, 512, 7, 7, [1, 1]).suits_winograd::<f32>());
        assert!(geometry(8, 512, 512, 7, 7, [1, 1]).suits_winograd::<f32>());
        let mut strided = geometry(1, 32, 64, 23, 23, [0, 0]);
        strided.stride = [2, 2];
        assert!(!strided.suits_winograd::<f32>());
    }

    #[test]
    fn the_weights_transform_follows_their_stamp() {
        let g = geometry(1, 8, 8, 8, 8, [1, 1]);
        let x = values(8 * 64, 4);
        let (w1, w2, b) = (values(8 * 8 * 9, 5), values(8 * 8 * 9, 6), vec![0.0; 8]);
        let mut s = WinogradScratch::default();
        let (mut first, mut again, mut other) = (vec![0.0; 512], vec![0.0; 512], vec![0.0; 512]);
        forward(&g, &mut s, 7, &x, &w1, &b, &mut first).unwrap();
        // Same stamp: the transform kept (new weights unseen).
        forward(&g, &mut s, 7, &x, &w2, &b, &mut again).unwrap();
        assert_eq!(first, again);
        // A new stamp: the new weights used.
        forward(&g, &mut s, 8, &x, &w2, &b, &mut other).unwrap();
        let want = direct(&g, &x, &w2, &b);
        assert!(
            other
                .iter()
                .zip(&want)
                .all(|(&a, &b)| (a as f64 - b).abs() < 1e-4)
        );
    }
}
