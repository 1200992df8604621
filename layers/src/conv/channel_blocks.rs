//! A convolution's pass with its input, its output or both in
//! [`ChannelBlocks`], as a net that reuses memory hands them between
//! MobileNet's depthwise and 1x1 layers: the depthwise layer reads each
//! block's rows into its padded plane and writes its block where it lies
//! (in Caffe's layout, a transpose on each side took half its time), and
//! the 1x1 layer broadcasts its inputs from the blocks with nothing
//! packed. Any other layer given blocks converts them, so every layer
//! gives the bits it gives in Caffe's layout.

use blob_kernels::cpu::{self, PointwiseShape, Rectifier};
use blob_runtime::{Blob, MathElement};

use super::cpu::{ConvGeometry, Finish, rectifier_of};
use super::depthwise;
use super::engine::{ConvEngine, EngineChoice};
use crate::dyn_layer::bad_param;
use crate::f32_view::{as_f32, as_f32_mut, f32_as, f32_as_mut};
use crate::layer::Result;
use crate::{Activation, ChannelBlocks};

const BLOCK: usize = cpu::INTERLEAVED_LANES;

/// What a convolution keeps for its passes in blocks: its 1x1 (or
/// first layer's) weights laid in blocks, the stamp and shape they were
/// laid from, a buffer for a side it converts, a depthwise layer's own
/// buffers, and a first layer's rings of input rows (one a core's band).
#[derive(Default)]
pub(crate) struct BlockScratch {
    weights: Vec<f32>,
    made_from: Option<(u64, usize, usize)>,
    values: Vec<f32>,
    planes: Vec<f32>,
    depthwise: depthwise::BlockedScratch,
    rings: Vec<Vec<f32>>,
}

/// Whether a layer of `g` over `groups` takes [`ChannelBlocks`] and runs
/// faster so: a depthwise layer or a 1x1 one of stride 1, 16 channels a
/// block in and out, the 1x1 one at most
/// [`cpu::POINTWISE_BLOCKED_MAX_DEPTH`] deep and over a plane too large
/// for [packed weights](ConvGeometry::takes_packed_weights), on AVX-512
/// or AVX2. Over MobileNet-SSD's 10 x 10 planes, its conv12 and conv13
/// ran 3-7% slower from blocks than from packed weights (one Zen 4 core,
/// 2026-12-06), more than its conv13/dw gained (0.076 -> 0.053 ms).
pub(crate) fn blocks_suit(g: &ConvGeometry, groups: usize) -> bool {
    let pointwise = PointwiseShape {
        depth: g.channels_in,
        outputs: g.channels_out,
        pixels: g.oh * g.ow,
        blocked_input: true,
    };
    cpu::isa() >= cpu::Isa::Avx2
        && g.channels_in.is_multiple_of(BLOCK)
        && g.channels_out.is_multiple_of(BLOCK)
        && (g.is_depthwise(groups)
            || groups == 1
                && g.is_pointwise()
                && pointwise.suits()
                && !g.takes_packed_weights::<f32>())
}

/// Whether a layer of `g` over `groups` is a net's first layer that
/// writes [`ChannelBlocks`] from Caffe's planes
/// ([`cpu::shallow_3x3_to_blocked`]): MobileNet's 3 x 3 window (padding
/// 1, stride 1 or 2) over at most [`cpu::SHALLOW_BLOCKED_MAX_CHANNELS`]
/// channels, whole blocks out, on AVX-512 or AVX2. The depthwise layer
/// after it then reads its blocks where they lie, rather than lay its
/// 150 x 150 planes in blocks itself (MobileNet-SSD's conv1/dw).
pub(crate) fn first_layer_suits(g: &ConvGeometry, groups: usize) -> bool {
    cpu::isa() >= cpu::Isa::Avx2
        && groups == 1
        && g.channels_in <= cpu::SHALLOW_BLOCKED_MAX_CHANNELS
        && g.channels_out.is_multiple_of(BLOCK)
        && depthwise::mobilenet_window(g)
        && shallow_window(g).suits()
}

/// `g`'s input as [`cpu::shallow_3x3_to_blocked`] reads it.
fn shallow_window(g: &ConvGeometry) -> cpu::ShallowWindow {
    cpu::ShallowWindow {
        channels: g.channels_in,
        height: g.h,
        width: g.w,
        stride: g.stride[0],
    }
}

/// A core's share of a first layer's pass: an image's output rows, and
/// their pixels in each output block.
struct RowBand<'a> {
    image: usize,
    rows: std::ops::Range<usize>,
    out: Vec<&'a mut [f32]>,
}

/// Caffe's planes (`channels` of `pixels` a image, whole blocks) into
/// [`ChannelBlocks`].
fn to_blocks(planes: &[f32], pixels: usize, blocks: &mut [f32]) {
    let chunks = planes.chunks_exact(BLOCK * pixels);
    for (from, to) in chunks.zip(blocks.chunks_exact_mut(BLOCK * pixels)) {
        let runs: Vec<&[f32]> = from.chunks_exact(pixels).collect();
        cpu::interleave_runs(&runs, pixels, to);
    }
}

/// [`ChannelBlocks`] back into Caffe's planes.
fn from_blocks(blocks: &[f32], pixels: usize, planes: &mut [f32]) {
    let chunks = blocks.chunks_exact(BLOCK * pixels);
    for (from, to) in chunks.zip(planes.chunks_exact_mut(BLOCK * pixels)) {
        let mut runs: Vec<&mut [f32]> = to.chunks_exact_mut(pixels).collect();
        cpu::deinterleave_runs(from, pixels, &mut runs);
    }
}

/// Each 4-D f32 top's values, in Caffe's layout, put into blocks in
/// place.
pub(crate) fn into_blocks<T: MathElement>(tops: &[&Blob<T>]) -> Result<()> {
    for top in tops {
        let pixels: usize = top.shape().iter().skip(2).product();
        let mut values = top.mutable_cpu_data()?;
        if let Some(v) = as_f32_mut(&mut values) {
            let planes = v.to_vec();
            to_blocks(&planes, pixels, v);
        }
    }
    Ok(())
}

impl<T: MathElement> ConvEngine<T> {
    /// [`forward_grouped`](Self::forward_grouped) on the host, no
    /// shortcut, with the bottom, the top or both in `blocks` (f32,
    /// whole blocks of channels, 4-D).
    pub(crate) fn forward_blocked(
        &mut self,
        g: &ConvGeometry,
        groups: usize,
        choice: EngineChoice,
        (x, weight, bias, y): (&Blob<T>, &Blob<T>, &Blob<T>, &Blob<T>),
        activation: Option<Activation>,
        blocks: ChannelBlocks,
    ) -> Result<()> {
        let refuse = || {
            bad_param(
                "convolve",
                format!(
                    "channel blocks need f32 and whole blocks of {BLOCK} channels; this layer \
                     has {} -> {} channels",
                    g.channels_in, g.channels_out
                ),
            )
        };
        if (blocks.input && !g.channels_in.is_multiple_of(BLOCK))
            || (blocks.output && !g.channels_out.is_multiple_of(BLOCK))
        {
            return Err(refuse());
        }
        let (pixels_in, pixels_out) = (g.h * g.w, g.oh * g.ow);
        {
            let (xd, wd, bd) = (x.cpu_data()?, weight.cpu_data()?, bias.cpu_data()?);
            let mut yd = y.mutable_cpu_data()?;
            let (Some(x32), Some(w32), Some(b32), Some(y32)) =
                (as_f32(&xd), as_f32(&wd), as_f32(&bd), as_f32_mut(&mut yd))
            else {
                return Err(refuse());
            };
            let finish = Finish {
                bias: b32,
                activation,
            };
            let stamp = weight.data().write_stamp();
            if blocks.output
                && !blocks.input
                && first_layer_suits(g, groups)
                && self.blocks.first_layer(g, (x32, (w32, stamp)), finish, y32)
            {
                return Ok(());
            }
            if g.is_depthwise(groups)
                && depthwise::forward_blocked(
                    g,
                    &mut self.blocks.depthwise,
                    x32,
                    w32,
                    finish,
                    y32,
                    blocks,
                )
            {
                return Ok(());
            }
            if groups == 1
                && self
                    .blocks
                    .pointwise(g, (x32, (w32, stamp)), finish, y32, blocks)
            {
                return Ok(());
            }
        }
        // Any other path: its input back in Caffe's layout first, its
        // output written into a buffer and from there into blocks.
        let mut values = std::mem::take(&mut self.blocks.values);
        let mut planes = std::mem::take(&mut self.blocks.planes);
        if blocks.input {
            let xd = x.cpu_data()?;
            let x32 = as_f32(&xd).ok_or_else(refuse)?;
            values.resize(x32.len(), 0.0);
            from_blocks(x32, pixels_in, &mut values);
        }
        let per_image = g.channels_out * pixels_out;
        let ran = (|| {
            let mut yd = y.mutable_cpu_data()?;
            let y32 = as_f32_mut(&mut yd).ok_or_else(refuse)?;
            let out: &mut [f32] = if blocks.output {
                planes.resize(y32.len(), 0.0);
                &mut planes
            } else {
                y32
            };
            let out = f32_as_mut::<T>(out).ok_or_else(refuse)?;
            if blocks.input {
                let input = f32_as::<T>(&values).ok_or_else(refuse)?;
                self.forward_into(
                    g,
                    groups,
                    choice,
                    (input, weight, bias),
                    (out, per_image),
                    activation,
                )?;
            } else {
                let xd = x.cpu_data()?;
                self.forward_into(
                    g,
                    groups,
                    choice,
                    (&xd, weight, bias),
                    (out, per_image),
                    activation,
                )?;
            }
            if blocks.output {
                to_blocks(&planes, pixels_out, y32);
            }
            Ok(())
        })();
        self.blocks.planes = planes;
        self.blocks.values = values;
        ran
    }
}

impl BlockScratch {
    /// The weights of `outputs x depth` in blocks
    /// ([`cpu::block_pointwise_weights`]), laid again only when their
    /// stamp or shape changed.
    fn lay_weights(&mut self, weight: &[f32], stamp: u64, (outputs, depth): (usize, usize)) {
        if self.made_from != Some((stamp, outputs, depth)) {
            self.weights = cpu::block_pointwise_weights(weight, outputs, depth);
            self.made_from = Some((stamp, outputs, depth));
        }
    }

    /// A net's first layer ([`first_layer_suits`]) from Caffe's planes
    /// into blocks, each core a band of each image's output rows. Says
    /// whether it ran (AVX-512 or AVX2).
    fn first_layer(
        &mut self,
        g: &ConvGeometry,
        (x, (weight, stamp)): (&[f32], (&[f32], u64)),
        finish: Finish<'_, f32>,
        y: &mut [f32],
    ) -> bool {
        let (depth, outputs) = (g.patch(), g.channels_out);
        let (pixels, per_in) = (g.oh * g.ow, g.channels_in * g.h * g.w);
        self.lay_weights(weight, stamp, (outputs, depth));
        let rectifier = rectifier_of(finish.activation);
        let finish_pair = (finish.bias, rectifier.unwrap_or(Rectifier::None));
        let bands = cpu::cores().clamp(1, g.oh.max(1));
        let per_band = g.oh.div_ceil(bands).max(1);
        let mut parts: Vec<RowBand<'_>> = Vec::new();
        let out = &mut y[..g.batch * outputs * pixels];
        for (image, planes) in out.chunks_exact_mut(outputs * pixels).enumerate() {
            let first = parts.len();
            for start in (0..g.oh).step_by(per_band) {
                parts.push(RowBand {
                    image,
                    rows: start..(start + per_band).min(g.oh),
                    out: Vec::new(),
                });
            }
            for block in planes.chunks_exact_mut(BLOCK * pixels) {
                let mut rest = block;
                for band in &mut parts[first..] {
                    let len = band.rows.len() * g.ow * BLOCK;
                    let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
                    band.out.push(head);
                    rest = tail;
                }
            }
        }
        if self.rings.len() < parts.len() {
            self.rings.resize_with(parts.len(), Vec::new);
        }
        let (window, weights) = (shallow_window(g), &self.weights);
        let ran = std::sync::atomic::AtomicBool::new(true);
        let items = parts.into_iter().zip(&mut self.rings);
        cpu::on_cores(items, |(band, ring)| {
            let RowBand {
                image,
                rows,
                out: mut piece,
            } = band;
            let input = &x[image * per_in..][..per_in];
            if !cpu::shallow_3x3_to_blocked(
                input,
                window,
                weights,
                finish_pair,
                rows,
                &mut piece,
                ring,
            ) {
                ran.store(false, std::sync::atomic::Ordering::Relaxed);
            }
        });
        if rectifier.is_none() {
            finish.activate(&mut y[..g.batch * outputs * pixels]);
        }
        ran.into_inner()
    }

    /// A 1x1 layer's pass from blocks, into blocks or Caffe's planes
    /// (the kernel writes blocks; the other sides are converted). Says
    /// whether it ran: a 1x1 layer of a shape
    /// [`cpu::pointwise_blocked`] takes, on AVX-512 or AVX2.
    fn pointwise(
        &mut self,
        g: &ConvGeometry,
        (x, (weight, stamp)): (&[f32], (&[f32], u64)),
        finish: Finish<'_, f32>,
        y: &mut [f32],
        blocks: ChannelBlocks,
    ) -> bool {
        let pixels = g.oh * g.ow;
        let (depth, outputs) = (g.channels_in, g.channels_out);
        let shape = PointwiseShape {
            depth,
            outputs,
            pixels,
            blocked_input: blocks.input,
        };
        if !blocks_suit(g, 1) || !g.is_pointwise() || pixels == 0 {
            return false;
        }
        self.lay_weights(weight, stamp, (outputs, depth));
        let rectifier = rectifier_of(finish.activation);
        let (per_in, per_out) = (depth * pixels, outputs * pixels);
        let mut planes = std::mem::take(&mut self.planes);
        let out: &mut [f32] = if blocks.output {
            &mut y[..g.batch * per_out]
        } else {
            planes.resize(g.batch * per_out, 0.0);
            &mut planes
        };
        // Each core a run of pixels of every output block, whole tiles.
        let parts = cpu::cores().clamp(1, pixels.div_ceil(6).max(1));
        let per_part = pixels.div_ceil(parts).next_multiple_of(6);
        let finish_pair = (finish.bias, rectifier.unwrap_or(Rectifier::None));
        for (image, out) in out.chunks_exact_mut(per_out).enumerate() {
            let input = &x[image * per_in..][..per_in];
            let mut pieces: Vec<(usize, Vec<&mut [f32]>)> = (0..pixels)
                .step_by(per_part)
                .map(|first| (first, Vec::new()))
                .collect();
            for block in out.chunks_exact_mut(BLOCK * pixels) {
                let mut rest = block;
                for (_, piece) in &mut pieces {
                    let len = (per_part * BLOCK).min(rest.len());
                    let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
                    piece.push(head);
                    rest = tail;
                }
            }
            let weights = &self.weights;
            cpu::on_cores(pieces, |(first, mut piece)| {
                cpu::pointwise_blocked(shape, input, weights, finish_pair, first, &mut piece);
            });
        }
        if !blocks.output {
            from_blocks(&planes, pixels, &mut y[..g.batch * per_out]);
        }
        self.planes = planes;
        if rectifier.is_none() {
            finish.activate(&mut y[..g.batch * per_out]);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::cpu::{ConvScratch, forward};
    use crate::conv::test_support::{geometry, values};

    /// Depthwise layers (strides 1 and 2, a 150 x 150 plane and a 10 x
    /// 10 one, a 5 x 5 window), 1x1 layers (two images, pixels no
    /// multiple of a tile, each activation) and a net's first layers
    /// (3 and 1 channels, strides 2 and 1) with every combination of
    /// sides in blocks: the
    /// bits of the layer in Caffe's layout, converted, the depthwise
    /// layers' buffers kept from one to the next; where [`blocks_suit`]
    /// refuses a layer, it does not run.
    #[test]
    fn blocked_sides_give_the_caffe_layouts_bits() {
        // (cin, (h, w), kernel, cout, images, stride, pad, dilation), groups
        let layers = [
            ((32, (150, 150), [3, 3], 32, 1, [1, 1], [1, 1], [1, 1]), 32),
            ((64, (19, 19), [3, 3], 64, 2, [2, 2], [1, 1], [1, 1]), 64),
            ((32, (10, 10), [3, 3], 32, 1, [1, 1], [1, 1], [1, 1]), 32),
            // Not MobileNet's window: from blocks alone.
            ((16, (9, 7), [5, 5], 16, 2, [1, 1], [2, 2], [1, 1]), 16),
            ((32, (19, 19), [1, 1], 48, 2, [1, 1], [0, 0], [1, 1]), 1),
            ((64, (13, 11), [1, 1], 32, 1, [1, 1], [0, 0], [1, 1]), 1),
            // Packed weights' plane: refused.
            ((64, (7, 5), [1, 1], 32, 1, [1, 1], [0, 0], [1, 1]), 1),
            // A net's first layer: into blocks from Caffe's planes alone.
            ((3, (61, 45), [3, 3], 32, 2, [2, 2], [1, 1], [1, 1]), 1),
            ((1, (17, 13), [3, 3], 16, 1, [1, 1], [1, 1], [1, 1]), 1),
            // Its window but too many channels: refused.
            ((8, (9, 9), [3, 3], 16, 1, [2, 2], [1, 1], [1, 1]), 1),
        ];
        let activations = [
            None,
            Some(Activation::Relu),
            Some(Activation::Relu6),
            Some(Activation::LeakyRelu {
                negative_slope: 0.1,
            }),
        ];
        // Depthwise, 1x1 and first layers' passes compared.
        let mut checked = [0usize; 3];
        // Kept over every depthwise pass, of each shape, as a layer keeps
        // it over its reshapes.
        let mut depthwise_scratch = depthwise::BlockedScratch::default();
        let mut first_scratch = BlockScratch::default();
        for (n, (window, groups)) in layers.into_iter().enumerate() {
            let g = geometry(window);
            let x = values(g.batch * g.channels_in * g.h * g.w, 1 + n as u32);
            let patch = g.channels_in / groups * g.kernel[0] * g.kernel[1];
            let weight = values(g.channels_out * patch, 20 + n as u32);
            let weight = weight.as_slice();
            let bias = values(g.channels_out, 40 + n as u32);
            let (pixels_in, pixels_out) = (g.h * g.w, g.oh * g.ow);
            let per_image = g.channels_out * pixels_out;
            for activation in activations {
                let finish = Finish {
                    bias: &bias,
                    activation,
                };
                let mut want = vec![f32::NAN; g.batch * per_image];
                if groups == 1 {
                    let mut scratch = ConvScratch::default();
                    let out = (&mut want[..], per_image);
                    forward(&g, &mut scratch, &x, (weight, None), finish, out).unwrap();
                } else {
                    depthwise::forward(&g, &x, weight, finish, &mut want);
                }
                let mut x_blocks = vec![0.0; x.len()];
                to_blocks(&x, pixels_in, &mut x_blocks);
                let mut want_blocks = vec![0.0; want.len()];
                to_blocks(&want, pixels_out, &mut want_blocks);
                for (input, output) in [(true, true), (true, false), (false, true)] {
                    let blocks = ChannelBlocks { input, output };
                    let x = if input { &x_blocks } else { &x };
                    let mut got = vec![f32::NAN; want.len()];
                    let first = first_layer_suits(&g, groups);
                    let ran = if first {
                        // Each layer's weights their own stamp.
                        let weights = (weight, n as u64 + 1);
                        !input
                            && output
                            && first_scratch.first_layer(&g, (x, weights), finish, &mut got)
                    } else if groups == 1 {
                        let mut scratch = BlockScratch::default();
                        scratch.pointwise(&g, (x, (weight, 1)), finish, &mut got, blocks)
                    } else {
                        depthwise::forward_blocked(
                            &g,
                            &mut depthwise_scratch,
                            x,
                            weight,
                            finish,
                            &mut got,
                            blocks,
                        )
                    };
                    // A depthwise layer reading Caffe's planes runs its
                    // own path, then converts (the engine's), but for
                    // MobileNet's window.
                    // A first layer writes blocks from planes alone.
                    let runs = if first {
                        !input && output
                    } else {
                        blocks_suit(&g, groups)
                            && (groups == 1 || input || depthwise::mobilenet_window(&g))
                    };
                    assert_eq!(ran, runs, "{window:?}, {blocks:?}");
                    if !ran {
                        continue;
                    }
                    checked[if first { 2 } else { usize::from(groups == 1) }] += 1;
                    let want = if output { &want_blocks } else { &want };
                    let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert!(
                        bits(want) == bits(&got),
                        "{window:?}, {activation:?}, {blocks:?}"
                    );
                }
            }
        }
        let fast = cpu::isa() >= cpu::Isa::Avx2;
        assert!(!fast || checked.iter().all(|&n| n > 0), "{checked:?}");
    }
}
