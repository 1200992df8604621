//! Depthwise convolution on the CPU (`group` = input channels = output
//! channels, MobileNet's 3x3 layers): each plane convolved with its own
//! kernel directly, tap by tap along output rows, the planes shared
//! across the cores. im2col and a gemm of one row per group would spend
//! their time copying.

use blob_kernels::cpu::{self, AlignedVec};
use blob_runtime::MathElement;

use super::cpu::{ConvGeometry, Finish};
use crate::f32_view::{as_f32, as_f32_mut};
use crate::{Activation, ChannelBlocks};

impl ConvGeometry {
    /// One kernel per channel (`groups` = input = output channels).
    pub fn is_depthwise(&self, groups: usize) -> bool {
        groups > 1 && self.channels_in == groups && self.channels_out == groups
    }
}

/// `y = conv(x) + bias` for a depthwise `g` (whole batch), finished as
/// `finish` says, `weight` `(channels, 1, kh, kw)`. Caffe's `ReLU` is
/// applied by the kernels as they store each output (a pass of its own
/// over each plane, even in cache, cost a chain of MobileNet's 150 x 150
/// layers 11% of their time); other activations run over each plane
/// while it is in cache.
pub(crate) fn forward<T: MathElement>(
    g: &ConvGeometry,
    x: &[T],
    weight: &[T],
    finish: Finish<'_, T>,
    y: &mut [T],
) {
    let bias = finish.bias;
    let (plane_in, plane_out) = (g.h * g.w, g.oh * g.ow);
    let taps = g.kernel[0] * g.kernel[1];
    let channels = g.channels_out;
    if plane_out == 0 {
        return;
    }
    // Planes read where they lie: the strided layers' but the narrowest,
    // the unstrided ones' that `flat` does not take.
    let in_place = (is_3x3_stride2_pad1(g) && g.ow >= strided_in_place_min())
        || (is_3x3_unit_stride_pad1(g) && g.ow >= FLAT_BELOW);
    let flat_here = is_3x3_unit_stride_pad1(g) && g.ow < FLAT_BELOW;
    if (g.ow < NARROW || flat_here)
        && !in_place
        && let (Some(x), Some(weight), Some(bias), Some(y32)) =
            (as_f32(x), as_f32(weight), as_f32(bias), as_f32_mut(&mut *y))
    {
        let finish = Finish {
            bias,
            activation: finish.activation,
        };
        let ran = if flat_here {
            flat(g, x, weight, finish, y32)
        } else {
            interleaved(g, x, weight, finish, y32, ChannelBlocks::default())
        };
        if ran {
            return;
        }
    }
    let rectify = finish.activation == Some(Activation::Relu);
    // Planes in one run per core (small planes: a task each would cost
    // more to hand out than to compute).
    let planes = g.batch * channels;
    let per_part = planes.div_ceil(cpu::cores()).max(1);
    let items = y[..planes * plane_out]
        .chunks_mut(per_part * plane_out)
        .enumerate();
    cpu::on_cores(items, |(part, out)| {
        let mut padded = Padded::new(g);
        cpu::vectorized(
            #[inline(always)]
            || {
                for (i, out) in (part * per_part..).zip(out.chunks_mut(plane_out)) {
                    let c = i % channels;
                    let (x, w) = (&x[i * plane_in..][..plane_in], &weight[c * taps..][..taps]);
                    if in_place && in_place_f32(g, x, w, &bias[c..=c], rectify, out) {
                        if !rectify {
                            finish.activate(out);
                        }
                        continue;
                    }
                    padded.fill(g, x);
                    if plane_f32(g, &padded, w, &bias[c..=c], rectify, out) {
                        if !rectify {
                            finish.activate(out);
                        }
                    } else {
                        plane(g, &padded, w, bias[c], out);
                        finish.activate(out);
                    }
                }
            },
        );
    });
}

/// Whether `g` is MobileNet's unstrided depthwise window: 3 x 3 at
/// stride 1 with a row and a column of zeros around the plane.
fn is_3x3_unit_stride_pad1(g: &ConvGeometry) -> bool {
    (g.kernel, g.stride, g.pad, g.dilation) == ([3, 3], [1, 1], [1, 1], [1, 1])
}

/// [`forward`] for an [`is_3x3_unit_stride_pad1`] layer whose rows are
/// narrower than [`FLAT_BELOW`], each plane one run of outputs through
/// `cpu::depthwise_3x3_flat` (the same bits as the planes'), a run of
/// planes a core, each finished (activated) by the core that wrote it;
/// says whether it ran (AVX-512 or AVX2). In place of 16 channels side
/// by side ([`interleaved`]), whose transposes took 45% of MobileNet's
/// 512 x 19 x 19 layers.
fn flat(
    g: &ConvGeometry,
    x: &[f32],
    weight: &[f32],
    finish: Finish<'_, f32>,
    y: &mut [f32],
) -> bool {
    let (plane, channels) = (g.h * g.w, g.channels_out);
    let planes = g.batch * channels;
    let per_part = planes.div_ceil(cpu::cores()).max(1);
    let rectify = finish.activation == Some(Activation::Relu);
    let ran = std::sync::atomic::AtomicBool::new(true);
    let parts = y[..planes * plane].chunks_mut(per_part * plane).enumerate();
    cpu::on_cores(parts, |(part, out)| {
        let mut first = part * per_part;
        let end = first + out.len() / plane;
        let mut out = out;
        // A call a run of one image's channels, whose weights are
        // adjacent.
        while first < end {
            let c = first % channels;
            let count = (channels - c).min(end - first);
            let (run, rest) = std::mem::take(&mut out).split_at_mut(count * plane);
            let input = &x[first * plane..][..count * plane];
            let (w, bias) = (&weight[9 * c..][..9 * count], &finish.bias[c..][..count]);
            if !cpu::depthwise_3x3_flat(input, (g.h, g.w), w, bias, rectify, run) {
                ran.store(false, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            if !rectify {
                finish.activate(run);
            }
            (first, out) = (first + count, rest);
        }
    });
    ran.into_inner()
}

/// Output rows narrower than this run each plane as one run of outputs
/// ([`flat`]) or 16 channels side by side ([`interleaved`]): a row's
/// register would be mostly empty.
const NARROW: usize = 24;

/// Output rows of an [`is_3x3_unit_stride_pad1`] layer narrower than
/// this run as one run of outputs ([`flat`]) rather than row by row
/// (then over a padded copy). Three layers, ms, one Zen 4 core, medians
/// of 3, flat against rows, AVX-512 / AVX2: 256 x 28 x 28 0.253 / 0.319
/// and 0.292 / 0.463, 256 x 38 x 38 0.486 / 0.542 and 0.560 / 0.667;
/// from 56 wide the rows' shared loads win: 128 x 56 x 56 0.541 / 0.511
/// and 0.630 / 0.597, 128 x 75 x 75 1.07 / 0.93. With the rows read in
/// place ([`in_place_f32`]), MobileNet-SSD's 256 x 38 x 38 in the net on
/// an Intel core (2026-12-02): flat 0.211 / 0.238, rows 0.192 / 0.282.
/// With four rows a pass at stride 1, the layers alone on one Zen 5 core
/// (2026-12-05, medians of 5), flat against rows, AVX-512 / AVX2, ms:
/// 256 x 38 x 38 0.099 / 0.155 and 0.080 / 0.125, 256 x 32 x 32 0.068 /
/// 0.102 and 0.048 / 0.086; 512 x 26 x 26 (MobileNet-YOLO's) 0.093 /
/// 0.141 and 0.087 / 0.154, 256 x 22 x 22 0.035 and 0.037, 512 x 19 x
/// 19 0.053 and 0.067.
const FLAT_BELOW: usize = 32;

/// [`forward`] with 16 channels of an image at a time laid side by side,
/// one pixel a 16-lane vector, through `cpu::depthwise_interleaved` (the
/// same bits as the planes'), each group's planes finished (activated)
/// by the core that wrote them, while they are in its cache; says whether
/// it ran (AVX-512 or AVX2): the narrow layers [`flat`] does not take
/// (MobileNet's strided ones), whose 10- and 19-wide rows lit 10 or 3 of
/// a row's 16 lanes.
///
/// With `blocks`, the input, the output or both are already in blocks of
/// 16 channels ([`ChannelBlocks`]): a block's pixels are copied row by
/// row into the padded plane, and the kernel writes the output block
/// where it lies, with no transpose on either side.
fn interleaved(
    g: &ConvGeometry,
    x: &[f32],
    weight: &[f32],
    finish: Finish<'_, f32>,
    y: &mut [f32],
    blocks: ChannelBlocks,
) -> bool {
    const LANES: usize = cpu::INTERLEAVED_LANES;
    let ([kh, kw], [dh, dw], [ph, pw]) = (g.kernel, g.dilation, g.pad);
    let plane_in = g.h * g.w;
    let (hp, wp) = (g.h + 2 * ph, g.w + 2 * pw);
    let offsets: Vec<usize> = (0..kh)
        .flat_map(|ki| (0..kw).map(move |kj| ki * dh * wp + kj * dw))
        .collect();
    let taps = cpu::InterleavedTaps {
        offsets: &offsets,
        row_step: g.stride[0] * wp,
        column_step: g.stride[1],
        rows: g.oh,
        columns: g.ow,
    };
    // The padding's zeros, written once, stay: every group writes the
    // same interior pixels. On cache lines, so that no pixel's load
    // spans two (a 16-byte aligned buffer had three in four do so:
    // MobileNet's 19 x 19 layers ran 1.1x-1.2x slower).
    let padded = || AlignedVec::<f32>::with_len(hp * wp * LANES);
    let frame = GroupFrame {
        g,
        weight,
        taps: offsets.len(),
        finish,
        into_blocks: blocks.output,
    };
    // Made anew each pass: its zeros stand where this geometry pads.
    frame.run(y, &mut Vec::new(), padded, |input, group, to| {
        // Whole planes at once (a transpose of rows as narrow as these
        // would be mostly its ragged end), each pixel put straight into
        // its padded row: through a dense copy and a copy of each row,
        // the copies took 15% of a chain of 512-channel 19 x 19 layers.
        let interior = &mut input[(ph * wp + pw) * LANES..];
        if blocks.input {
            let block = &x[group.first * plane_in..][..LANES * plane_in];
            let rows = block.chunks_exact(g.w * LANES);
            for (row, to) in rows.zip(interior.chunks_mut(wp * LANES)) {
                to[..row.len()].copy_from_slice(row);
            }
        } else {
            let runs: Vec<&[f32]> = x[group.first * plane_in..][..group.count * plane_in]
                .chunks_exact(plane_in)
                .collect();
            cpu::interleave_rows(&runs, (g.h, g.w), wp, interior);
        }
        cpu::depthwise_interleaved(input, taps, group.weights, group.bias, group.rectify, to)
    })
}

/// [`forward`] with its input, its output or both in [`ChannelBlocks`]
/// (f32, channels in whole blocks of 16): MobileNet's window from either
/// layout ([`blocks_in_place`]), any other from blocks alone
/// ([`interleaved`], every plane size). Says whether it ran (AVX-512 or
/// AVX2).
pub(super) fn forward_blocked(
    g: &ConvGeometry,
    scratch: &mut BlockedScratch,
    x: &[f32],
    weight: &[f32],
    finish: Finish<'_, f32>,
    y: &mut [f32],
    blocks: ChannelBlocks,
) -> bool {
    if !g.channels_out.is_multiple_of(cpu::INTERLEAVED_LANES) {
        return false;
    }
    if mobilenet_window(g) {
        return blocks_in_place(g, scratch, x, weight, finish, y, blocks);
    }
    blocks.input && interleaved(g, x, weight, finish, y, blocks)
}

/// Whether a depthwise layer's window is MobileNet's, 3 x 3 with
/// padding 1 at stride 1 or 2 along both axes: the window that
/// `cpu::depthwise_3x3_blocked` takes, from blocks or Caffe's planes.
pub(super) fn mobilenet_window(g: &ConvGeometry) -> bool {
    let square = g.stride[0] == g.stride[1] && matches!(g.stride[0], 1 | 2);
    (g.kernel, g.pad, g.dilation) == ([3, 3], [1, 1], [1, 1]) && square
}

/// What a depthwise layer keeps between its passes into or from
/// [`ChannelBlocks`]: each core's blocks laid from Caffe's planes (up to
/// `cpu::WHOLE_BLOCK_MAX_BYTES` a core), which, made anew, cost an
/// allocation and its pages' faults a pass.
#[derive(Default)]
pub(crate) struct BlockedScratch {
    laid: Vec<Vec<f32>>,
}

/// [`forward_blocked`] for MobileNet's 3 x 3 windows (padding 1, stride
/// 1 or 2) through `cpu::depthwise_3x3_blocked`, each block read where
/// it lies (from Caffe's planes, laid in blocks first, a block whole or
/// a row at a time: `cpu::depthwise_3x3_planes_to_blocked`) and, into blocks,
/// written where it goes (else into a buffer and out to Caffe's
/// planes). Says whether it ran (AVX-512 or AVX2).
fn blocks_in_place(
    g: &ConvGeometry,
    scratch: &mut BlockedScratch,
    x: &[f32],
    weight: &[f32],
    finish: Finish<'_, f32>,
    y: &mut [f32],
    blocks: ChannelBlocks,
) -> bool {
    const LANES: usize = cpu::INTERLEAVED_LANES;
    let plane = cpu::BlockedPlane {
        height: g.h,
        width: g.w,
        stride: g.stride[0],
    };
    let plane_in = g.h * g.w;
    let frame = GroupFrame {
        g,
        weight,
        taps: 9,
        finish,
        into_blocks: blocks.output,
    };
    frame.run(y, &mut scratch.laid, Vec::new, |laid, group, to| {
        // A group's 16 channels start at the same value in blocks as
        // in planes.
        let input = &x[group.first * plane_in..][..LANES * plane_in];
        let (weights, bias, rectify) = (group.weights, group.bias, group.rectify);
        if blocks.input {
            cpu::depthwise_3x3_blocked(input, plane, weights, bias, rectify, to)
        } else {
            cpu::depthwise_3x3_planes_to_blocked(input, plane, weights, bias, rectify, to, laid)
        }
    })
}

/// What the 16-lane depthwise paths ([`interleaved`],
/// [`blocks_in_place`]) share: a layer's channels in groups of 16 (a
/// core a run of them), each group's weights and biases side by side as
/// its pixels are, its outputs written into blocks where they go or,
/// through a core's buffer, into Caffe's planes, and activated by the
/// core that wrote them while they are in its cache.
struct GroupFrame<'a> {
    g: &'a ConvGeometry,
    weight: &'a [f32],
    /// Weights a channel (the window's taps).
    taps: usize,
    finish: Finish<'a, f32>,
    /// Whether the output is in [`ChannelBlocks`].
    into_blocks: bool,
}

/// One group of (up to) 16 channels, as [`GroupFrame::run`] hands it to
/// its kernel.
struct LaneGroup<'a> {
    /// The group's first channel, counted over the whole batch: where its
    /// input starts, in planes.
    first: usize,
    /// Its channels (16 but for an image's last group in Caffe's planes).
    count: usize,
    weights: &'a [f32],
    bias: &'a [f32; cpu::INTERLEAVED_LANES],
    /// Whether the kernel applies the ReLU as it stores.
    rectify: bool,
}

impl GroupFrame<'_> {
    /// Runs `kernel(scratch, group, to)` on each group, `scratch` a
    /// core's own among `scratches` (those missing from
    /// `make_scratch`), `to` the group's 16-lane output (its block, or
    /// the core's buffer); says whether every call ran (AVX-512 or
    /// AVX2).
    fn run<S: Send>(
        &self,
        y: &mut [f32],
        scratches: &mut Vec<S>,
        make_scratch: impl FnMut() -> S,
        kernel: impl Fn(&mut S, &LaneGroup<'_>, &mut [f32]) -> bool + Sync,
    ) -> bool {
        const LANES: usize = cpu::INTERLEAVED_LANES;
        if cpu::isa() < cpu::Isa::Avx2 {
            return false;
        }
        let (g, finish) = (self.g, self.finish);
        let (plane_out, channels) = (g.oh * g.ow, g.channels_out);
        let (lane_weights, lane_bias) = lane_weights(self.weight, finish.bias, channels, self.taps);
        // An image's channels in groups of 16, its output planes side by
        // side.
        let groups: Vec<(usize, usize, &mut [f32])> = y[..g.batch * channels * plane_out]
            .chunks_mut(channels * plane_out)
            .enumerate()
            .flat_map(|(image, planes)| {
                planes
                    .chunks_mut(LANES * plane_out)
                    .enumerate()
                    .map(move |(group, out)| (image, group, out))
            })
            .collect();
        let per_part = groups.len().div_ceil(cpu::cores()).max(1);
        let mut parts: Vec<Vec<_>> = Vec::new();
        let mut groups = groups.into_iter().peekable();
        while groups.peek().is_some() {
            parts.push(groups.by_ref().take(per_part).collect());
        }
        if scratches.len() < parts.len() {
            scratches.resize_with(parts.len(), make_scratch);
        }
        let rectify = finish.activation == Some(Activation::Relu);
        let ran = std::sync::atomic::AtomicBool::new(true);
        cpu::on_cores(parts.into_iter().zip(scratches), |(part, scratch)| {
            let mut buffer = if self.into_blocks {
                AlignedVec::new()
            } else {
                AlignedVec::with_len(plane_out * LANES)
            };
            for (image, group, planes) in part {
                let lanes = LaneGroup {
                    first: image * channels + group * LANES,
                    count: planes.len() / plane_out,
                    weights: &lane_weights[group * self.taps * LANES..][..self.taps * LANES],
                    bias: lane_bias[group * LANES..][..LANES]
                        .try_into()
                        .expect("a group's 16 biases"),
                    rectify,
                };
                let to: &mut [f32] = if self.into_blocks {
                    planes
                } else {
                    &mut buffer
                };
                if !kernel(scratch, &lanes, to) {
                    ran.store(false, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                if !self.into_blocks {
                    let mut runs: Vec<&mut [f32]> = planes.chunks_mut(plane_out).collect();
                    cpu::deinterleave_runs(&buffer, plane_out, &mut runs);
                }
                if !rectify {
                    finish.activate(planes);
                }
            }
        });
        ran.into_inner()
    }
}

/// Each group's weights (`taps` a channel) and biases side by side, as
/// its pixels are.
fn lane_weights(
    weight: &[f32],
    bias: &[f32],
    channels: usize,
    taps: usize,
) -> (Vec<f32>, Vec<f32>) {
    const LANES: usize = cpu::INTERLEAVED_LANES;
    let mut lane_weights = vec![0.0f32; channels.div_ceil(LANES) * taps * LANES];
    let mut lane_bias = vec![0.0f32; channels.div_ceil(LANES) * LANES];
    for c in 0..channels {
        let (group, l) = (c / LANES, c % LANES);
        lane_bias[group * LANES + l] = bias[c];
        for p in 0..taps {
            lane_weights[(group * taps + p) * LANES + l] = weight[c * taps + p];
        }
    }
    (lane_weights, lane_bias)
}

/// Outputs of a row computed together, their sums kept in registers
/// across every tap (one AVX-512 register of f32, two AVX2 ones).
const STRIP: usize = 16;

/// One input plane copied with its padding as zeros, its columns split
/// into `stride` phases (columns `p, p + s, ...` of each padded row), so
/// that every tap reads the inputs of [`STRIP`] neighbouring outputs as
/// one contiguous run, with room past each row for a whole strip; and
/// where each tap starts in it. A part's buffer, reused plane by plane.
struct Padded<T> {
    phases: AlignedVec<T>,
    /// The length of a phase's row.
    row: usize,
    /// Tap (ki, kj) of output (r, q) reads padded row r * sh + ki * dh,
    /// column q * sw + kj * dw: phase (kj * dw) % sw, place q + kj * dw /
    /// sw. Its start for output (0, 0).
    taps: Vec<usize>,
}

impl<T: MathElement> Padded<T> {
    fn new(g: &ConvGeometry) -> Self {
        let ([kh, kw], [dh, dw], [ph, pw]) = (g.kernel, g.dilation, g.pad);
        let (sw, hp) = (g.stride[1].max(1), g.h + 2 * ph);
        // Holds the padded row's columns of its phase, and reads of a
        // strip starting at any output stay inside it.
        // Each row starts a cache line (the buffer does): a tap at a row's
        // first column loads whole lines.
        let row = ((g.w + 2 * pw)
            .div_ceil(sw)
            .max(g.ow + ((kw - 1) * dw).div_ceil(sw))
            + STRIP)
            .next_multiple_of(STRIP);
        let taps = (0..kh)
            .flat_map(|ki| (0..kw).map(move |kj| (ki, kj * dw)))
            .map(|(ki, column)| ((column % sw) * hp + ki * dh) * row + column / sw)
            .collect();
        Padded {
            phases: AlignedVec::new(),
            row,
            taps,
        }
    }

    /// Copies plane `x` in (MobileNet's strided layers, read in place at
    /// stride 2, took twice as long as their unstrided neighbours with
    /// half the outputs).
    #[inline(always)]
    fn fill(&mut self, g: &ConvGeometry, x: &[T]) {
        let (width, [ph, pw]) = (g.w, g.pad);
        let (sw, hp, row) = (g.stride[1].max(1), g.h + 2 * ph, self.row);
        // Every plane writes the same places, so the padding's zeros,
        // written once, stay (zeroing it all a plane cost MobileNet's
        // 150 x 150 layer a quarter of its time).
        if self.phases.len() != sw * hp * row {
            self.phases = AlignedVec::with_len(sw * hp * row);
        }
        let phases = &mut self.phases[..];
        // Where input row iy's column ix lands: padded column pw + ix.
        let at =
            |phase: usize, iy: usize, column: usize| (phase * hp + iy + ph) * row + column / sw;
        for (iy, src) in x.chunks_exact(width).enumerate() {
            match sw {
                1 => copy_row(&mut phases[at(0, iy, pw)..][..width], src),
                // Even input columns to one phase, odd ones to the other,
                // a pair of columns at a time (`step_by` moves one value).
                2 => {
                    let (first, second) = phases.split_at_mut(hp * row);
                    let (even, odd) = if pw % 2 == 0 {
                        (first, second)
                    } else {
                        (second, first)
                    };
                    let even = &mut even[at(0, iy, pw)..][..width.div_ceil(2)];
                    let odd = &mut odd[at(0, iy, pw + 1)..][..width / 2];
                    let (pairs, last) = src.as_chunks::<2>();
                    for ((e, o), pair) in even.iter_mut().zip(odd.iter_mut()).zip(pairs) {
                        *e = pair[0];
                        *o = pair[1];
                    }
                    if let [v] = last {
                        even[width / 2] = *v;
                    }
                }
                // Input columns k, k + sw, ... share a phase, in a row.
                _ => {
                    for k in 0..sw.min(width) {
                        let start = at((pw + k) % sw, iy, pw + k);
                        let dst = &mut phases[start..];
                        for (d, &v) in dst.iter_mut().zip(src[k..].iter().step_by(sw)) {
                            *d = v;
                        }
                    }
                }
            }
        }
    }
}

/// `dst = src` (of the same length), 16 values a move:
/// `copy_from_slice` calls `memcpy`, whose entry cost a quarter of
/// MobileNet-SSD's 75 x 75 depthwise layer on rows of 300 bytes.
#[inline(always)]
fn copy_row<T: Copy>(dst: &mut [T], src: &[T]) {
    debug_assert_eq!(dst.len(), src.len(), "copy_row: runs of unequal length");
    let len = src.len();
    let (whole, rest) = src.as_chunks::<16>();
    {
        let (whole_dst, _) = dst.as_chunks_mut::<16>();
        for (d, s) in whole_dst.iter_mut().zip(whole) {
            *d = *s;
        }
    }
    if rest.is_empty() {
        return;
    }
    match (
        <&mut [T; 16]>::try_from(&mut dst[len.saturating_sub(16)..len]),
        <&[T; 16]>::try_from(&src[len.saturating_sub(16)..]),
    ) {
        // The last 16 again, over some already written: one move for
        // the ragged end.
        (Ok(d), Ok(s)) => *d = *s,
        _ => dst[len - rest.len()..len]
            .iter_mut()
            .zip(rest)
            .for_each(|(d, s)| *d = *s),
    }
}

/// [`plane`] through `cpu::depthwise_plane` where `T` is `f32` and the
/// machine has AVX-512 or AVX2 (the same bits), rectified as it is
/// stored where `rectify`; says whether it ran.
fn plane_f32<T: MathElement>(
    g: &ConvGeometry,
    padded: &Padded<T>,
    w: &[T],
    bias: &[T],
    rectify: bool,
    y: &mut [T],
) -> bool {
    let (Some(input), Some(w), Some(&[bias]), Some(y)) = (
        as_f32(&padded.phases),
        as_f32(w),
        as_f32(bias),
        as_f32_mut(y),
    ) else {
        return false;
    };
    let taps = cpu::DepthwiseTaps {
        offsets: &padded.taps,
        row_step: g.stride[0] * padded.row,
        rows: g.oh,
        columns: g.ow,
    };
    cpu::depthwise_plane(input, taps, w, bias, rectify, y)
}

/// The narrowest output rows of an [`is_3x3_stride2_pad1`] layer read in
/// place ([`in_place_f32`]) rather than 16 channels side by side
/// ([`interleaved`]). 256 x 38 x 38 -> 19 x 19 planes, ms, in place
/// against side by side (one Zen 4 core, medians of 3): AVX-512 0.234 /
/// 0.352, AVX2 0.321 / 0.398; 512 x 19 x 19 -> 10 x 10: 0.202 / 0.176 and
/// 0.298 / 0.211, where a row of 10 fills 10 of 16 lanes.
///
/// On AVX-512 every width now reads in place ([`strided_in_place_min`]):
/// one Zen 5 core (2026-12-05, medians of 5 alternating runs, ms), 512
/// x 19 x 19 -> 10 x 10 0.041 side by side, 0.035 in place (in
/// MobileNet-SSD, conv12/dw 0.086 -> 0.069), 512 x 26 x 26 -> 13 x 13
/// (MobileNet-YOLO's) 0.075 -> 0.052; on AVX2 the 10 x 10 planes ran
/// 0.038 side by side, 0.047 in place.
///
/// Since rows of one or two registers run in one loop over the plane
/// (`cpu::depthwise_3x3_stride2`), AVX2 reads MobileNet-YOLO's 13 x 13
/// in place too: one Zen 5 core (2026-12-05, medians of 5 alternating
/// runs, ms) 512 x 26 x 26 0.062 side by side, 0.056 in place (in the
/// net, level: 0.060 and 0.059); 10 x 10 0.037 side by side, 0.040 in
/// place.
const STRIDED_IN_PLACE_MIN: usize = 13;

/// [`STRIDED_IN_PLACE_MIN`] on this machine's widest path: none on
/// AVX-512.
fn strided_in_place_min() -> usize {
    if cpu::isa() == cpu::Isa::Avx512 {
        0
    } else {
        STRIDED_IN_PLACE_MIN
    }
}

/// Whether `g` is MobileNet's strided depthwise window: 3 x 3 at stride
/// 2 with a row and a column of zeros around the plane, which
/// [`in_place_f32`] reads where it lies.
fn is_3x3_stride2_pad1(g: &ConvGeometry) -> bool {
    (g.kernel, g.stride, g.pad, g.dilation) == ([3, 3], [2, 2], [1, 1], [1, 1])
}

/// A plane of an [`is_3x3_stride2_pad1`] or [`is_3x3_unit_stride_pad1`]
/// layer through `cpu::depthwise_3x3_stride2` or `_stride1`, from the
/// input plane itself, where `T` is `f32` and the machine has AVX-512 or
/// AVX2 (the bits of [`plane`] over the padded copy, whose making took
/// 62% of MobileNet-SSD's 64 x 150 x 150 strided layer, a third of its
/// 32 x 150 x 150 unstrided one); says whether it ran.
fn in_place_f32<T: MathElement>(
    g: &ConvGeometry,
    x: &[T],
    w: &[T],
    bias: &[T],
    rectify: bool,
    y: &mut [T],
) -> bool {
    let (Some(x), Some(w), Some(&[bias]), Some(y)) =
        (as_f32(x), as_f32(w), as_f32(bias), as_f32_mut(y))
    else {
        return false;
    };
    let kernel = match g.stride {
        [1, 1] => cpu::depthwise_3x3_stride1,
        _ => cpu::depthwise_3x3_stride2,
    };
    kernel(x, (g.h, g.w), w, bias, rectify, y)
}

/// One channel's plane from its [`Padded`] input: each strip of
/// [`STRIP`] outputs sums its taps in registers and is stored once
/// (summed tap by tap through memory, with the bounds of each tap
/// recomputed, MobileNet's 150x150 depthwise layer ran at 13 GFLOP/s).
/// Each output adds its taps in order, padding's zeros included (as
/// Caffe's im2col product does), then the bias.
#[inline(always)]
fn plane<T: MathElement>(g: &ConvGeometry, padded: &Padded<T>, w: &[T], bias: T, y: &mut [T]) {
    let (ow, sh) = (g.ow, g.stride[0]);
    for (r, out) in y.chunks_exact_mut(ow).take(g.oh).enumerate() {
        let line = r * sh * padded.row;
        for (q, out) in (0..ow).step_by(STRIP).zip(out.chunks_mut(STRIP)) {
            let mut acc = [T::ZERO; STRIP];
            for (&at, &wv) in padded.taps.iter().zip(w) {
                let src = &padded.phases[at + line + q..][..STRIP];
                for i in 0..STRIP {
                    acc[i] += wv * src[i];
                }
            }
            match <&mut [T; STRIP]>::try_from(&mut *out) {
                // A whole strip as one vector store.
                Ok(out) => {
                    for i in 0..STRIP {
                        out[i] = acc[i] + bias;
                    }
                }
                Err(_) => {
                    for (o, &a) in out.iter_mut().zip(&acc) {
                        *o = a + bias;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::{Activate, Rectify};

    #[test]
    fn copy_row_copies_every_length() {
        for len in [0, 1, 15, 16, 17, 31, 32, 75] {
            let src: Vec<u32> = (0..len as u32).collect();
            let mut dst = vec![u32::MAX; len];
            copy_row(&mut dst, &src);
            assert_eq!(dst, src, "{len} values");
        }
    }

    /// Each output as the definition: its taps in order over the padded
    /// input (padding read as zero), then the bias.
    fn reference<T: MathElement>(g: &ConvGeometry, x: &[T], w: &[T], bias: &[T]) -> Vec<T> {
        let [kh, kw] = g.kernel;
        let mut y = Vec::new();
        for plane in 0..g.batch * g.channels_out {
            let c = plane % g.channels_out;
            for r in 0..g.oh {
                for q in 0..g.ow {
                    let mut acc = T::ZERO;
                    for ki in 0..kh {
                        for kj in 0..kw {
                            let iy =
                                (r * g.stride[0] + ki * g.dilation[0]) as isize - g.pad[0] as isize;
                            let ix =
                                (q * g.stride[1] + kj * g.dilation[1]) as isize - g.pad[1] as isize;
                            let inside =
                                (0..g.h as isize).contains(&iy) && (0..g.w as isize).contains(&ix);
                            let v = if inside {
                                x[(plane * g.h + iy as usize) * g.w + ix as usize]
                            } else {
                                T::ZERO
                            };
                            acc += w[(c * kh + ki) * kw + kj] * v;
                        }
                    }
                    y.push(acc + bias[c]);
                }
            }
        }
        y
    }

    /// f32 runs `cpu::depthwise_plane` where the machine has AVX-512 or
    /// AVX2,
    /// f64 the portable loop.
    #[test]
    fn depthwise_planes_give_the_definitions_bits() {
        planes_give_the_definitions_bits::<f32>();
        planes_give_the_definitions_bits::<f64>();
    }

    fn planes_give_the_definitions_bits<T: MathElement>() {
        let mut seed = 7u32;
        let mut value = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        // (h, w, kernel, stride, pad, dilation): MobileNet's 3x3 at
        // strides 1 and 2, planes narrower and wider than a strip, odd
        // sizes, rectangular windows, stride 3, dilation, padding wider
        // than a tap's reach.
        let cases = [
            (19, 19, [3, 3], [1, 1], [1, 1], [1, 1]),
            (19, 19, [3, 3], [2, 2], [1, 1], [1, 1]),
            (5, 40, [3, 3], [2, 2], [1, 1], [1, 1]),
            (7, 9, [1, 5], [1, 3], [0, 2], [1, 1]),
            (11, 13, [5, 5], [2, 1], [2, 2], [1, 2]),
            (4, 4, [3, 3], [1, 1], [2, 2], [1, 1]),
            (3, 35, [2, 2], [1, 2], [0, 0], [2, 1]),
            (3, 113, [3, 3], [1, 1], [1, 1], [1, 1]),
            (4, 150, [3, 3], [1, 1], [1, 1], [1, 1]),
            // MobileNet's unstrided window on planes narrower than
            // FLAT_BELOW (one run of outputs a plane).
            (10, 10, [3, 3], [1, 1], [1, 1], [1, 1]),
            (6, 23, [3, 3], [1, 1], [1, 1], [1, 1]),
            (5, 40, [3, 3], [1, 1], [1, 1], [1, 1]),
            // MobileNet's strided window wide enough to be read in place
            // (odd and even sides, a masked register past the whole ones,
            // rows of 19).
            (9, 75, [3, 3], [2, 2], [1, 1], [1, 1]),
            (6, 150, [3, 3], [2, 2], [1, 1], [1, 1]),
            (5, 64, [3, 3], [2, 2], [1, 1], [1, 1]),
            (6, 38, [3, 3], [2, 2], [1, 1], [1, 1]),
            // The unstrided window read in place (as 113 and 150 wide
            // above): blocks of two rows and the row past them, whole
            // registers and the masked one past them.
            (7, 50, [3, 3], [1, 1], [1, 1], [1, 1]),
            (9, 30, [3, 3], [1, 1], [0, 0], [1, 1]),
        ];
        for ((h, w, kernel, stride, pad, dilation), channels) in
            cases.into_iter().flat_map(|case| [(case, 3), (case, 21)])
        {
            let batch = 2;
            let extent = |a: usize| dilation[a] * (kernel[a] - 1) + 1;
            let oh = (h + 2 * pad[0] - extent(0)) / stride[0] + 1;
            let ow = (w + 2 * pad[1] - extent(1)) / stride[1] + 1;
            let g = ConvGeometry {
                batch,
                channels_in: channels,
                channels_out: channels,
                h,
                w,
                oh,
                ow,
                kernel,
                stride,
                pad,
                dilation,
            };
            let mut values =
                |n: usize| -> Vec<T> { (0..n).map(|_| T::from_f64(value().into())).collect() };
            let x = values(batch * channels * h * w);
            let weight = values(channels * kernel[0] * kernel[1]);
            let bias = values(channels);
            let bits = |v: &[T]| v.iter().map(|v| v.to_f64().to_bits()).collect::<Vec<_>>();
            // Without an activation, and with the ReLU the kernels apply
            // as they store (its bits: `Rectify`'s).
            for activation in [None, Some(Activation::Relu)] {
                let mut y = vec![T::from_f64(f64::NAN); batch * channels * oh * ow];
                let finish = Finish {
                    bias: &bias,
                    activation,
                };
                forward(&g, &x, &weight, finish, &mut y);
                let mut want = reference(&g, &x, &weight, &bias);
                if activation.is_some() {
                    want.iter_mut().for_each(|v| *v = Rectify::apply(*v));
                }
                assert_eq!(
                    bits(&y),
                    bits(&want),
                    "{h}x{w}, kernel {kernel:?}, stride {stride:?}, pad {pad:?}, \
                     dilation {dilation:?}, {activation:?}"
                );
            }
        }
    }
}
