//! The CPU side of Convolution: im2col, one gemm per round of images sized
//! to stay in cache, and col2im for the input gradient (Caffe's
//! `Forward_cpu` and `Backward_cpu`); where a block of input channels'
//! column gradient fits L1, the input gradient goes image by image, a
//! block at a time, so col2im reads what the gemm has just written.

use std::any::TypeId;
use std::ops::Range;

use blob_kernels::cpu::{self, AlignedVec, Transpose};
use blob_runtime::MathElement;

use crate::Activation;
use crate::activation::{Activate, Rectify};
use crate::f32_view::{as_f32, as_f32_mut};
use crate::folded_activation::{leaky, relu6};
use crate::layer::{Result, ensure};

/// A convolution's sizes for one input: batch, input and output planes,
/// and per spatial axis (height, width) the kernel, stride, padding and
/// dilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvGeometry {
    pub batch: usize,
    pub channels_in: usize,
    pub channels_out: usize,
    pub h: usize,
    pub w: usize,
    pub oh: usize,
    pub ow: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub pad: [usize; 2],
    pub dilation: [usize; 2],
}

/// `col[to..to + len] = x[from..from + len]`, where the caller writes
/// `col` front to back: a short run is copied as a fixed block of 16 or 32
/// values (moves the compiler inlines, where a copy of unknown length
/// calls `memcpy`, which costs more than 8 values take to move); what the
/// block writes past the run, the runs after it overwrite.
#[inline(always)]
pub(super) fn copy_run<T: Copy>(col: &mut [T], to: usize, x: &[T], from: usize, len: usize) {
    #[inline(always)]
    fn block<T: Copy, const B: usize>(col: &mut [T], to: usize, x: &[T], from: usize) -> bool {
        match (col.get_mut(to..to + B), x.get(from..from + B)) {
            (Some(dst), Some(src)) => {
                dst.copy_from_slice(src);
                true
            }
            _ => false,
        }
    }
    let done = (len <= 8 && block::<T, 8>(col, to, x, from))
        || (len <= 16 && block::<T, 16>(col, to, x, from))
        || (len <= 32 && block::<T, 32>(col, to, x, from));
    if !done {
        col[to..to + len].copy_from_slice(&x[from..from + len]);
    }
}

/// `len` values of `x`, `step` apart from `from`, into `col` from `to`:
/// a strided window's im2col run. A step of 2 (ResNet-50's strided 1x1
/// layers) is a fixed stride the compiler vectorizes; each value looked
/// up on its own took 30% of the 256 -> 128 layer at 56 x 56.
#[inline(always)]
fn copy_every<T: Copy>(
    col: &mut [T],
    to: usize,
    x: &[T],
    (from, step): (usize, usize),
    len: usize,
) {
    let dst = &mut col[to..to + len];
    match x.get(from..from + 2 * len) {
        Some(pairs) if step == 2 => {
            for (d, pair) in dst.iter_mut().zip(pairs.chunks_exact(2)) {
                *d = pair[0];
            }
        }
        _ => {
            for (d, s) in dst.iter_mut().zip(x[from..].iter().step_by(step)) {
                *d = *s;
            }
        }
    }
}

/// Up to a panel's worth of runs, `(panel column, source, length)`, and
/// how many of them there are ([`ConvGeometry::panel_runs`]).
pub(super) type PanelRuns = ([(usize, usize, usize); cpu::PANEL_COLUMNS], usize);

/// One run of `ow` column entries: where it starts in the column buffer,
/// the input row it reads (`None` for a row of padding), and the outputs
/// `q` in `valid` whose input pixel `row + q * stride + shift - pad` is
/// inside the image (the others read padding).
struct Run {
    col: usize,
    row: Option<usize>,
    valid: std::ops::Range<usize>,
    shift: usize,
}

impl ConvGeometry {
    /// Caffe's output size: `(input + 2 pad - extent) / stride + 1`, the
    /// kernel's extent being `dilation (kernel - 1) + 1`.
    pub fn output_size(
        input: usize,
        kernel: usize,
        stride: usize,
        pad: usize,
        dilation: usize,
    ) -> usize {
        let extent = dilation * (kernel - 1) + 1;
        (input + 2 * pad).saturating_sub(extent) / stride + 1
    }

    /// Whether the forward product is taken pixel by pixel as dots
    /// ([`Self::im2col_by_pixel`], then `cpu::gemm_few_columns_as_dots`):
    /// `f32`, an output of at most 9 pixels, a window of 256 values or
    /// more, not a 1x1 window (its im2col is the input) nor a classifier
    /// over the whole input (one pixel of a dense window, whose images
    /// are its columns). MobileNet-SSD's 3 x 3 stride-2 layers onto 1 x 1,
    /// 2 x 2 and 3 x 3 ran 1.9x, 1.3x and 1.0x-1.3x faster (AVX-512 -
    /// AVX2) than from phase copies (the first) or packed weights, whose
    /// im2col, run by run, took a quarter of the time: a run is a pixel
    /// here (`cpu::gemm_few_columns_as_dots` has the figures).
    pub(super) fn takes_pixel_dots<T: 'static>(&self) -> bool {
        let p = self.oh * self.ow;
        TypeId::of::<T>() == TypeId::of::<f32>()
            && p > 0
            && !self.is_pointwise()
            && !(self.is_dense() && p == 1)
            && cpu::gemm_few_columns_as_dots(p, self.patch())
    }

    /// A 1x1 window at stride 1 without padding: im2col is the identity.
    pub fn is_pointwise(&self) -> bool {
        self.kernel == [1, 1] && self.stride == [1, 1] && self.pad == [0, 0]
    }

    /// The im2col patch length `channels_in * kernel_h * kernel_w`.
    pub fn patch(&self) -> usize {
        self.channels_in * self.kernel[0] * self.kernel[1]
    }

    /// Calls `run` for every run of images `first..first + count`; im2col
    /// and its inverse walk the same runs.
    fn for_each_run(&self, first: usize, count: usize, mut run: impl FnMut(Run)) {
        let Self {
            h,
            w,
            oh,
            ow,
            kernel: [kh, kw],
            stride: [sh, sw],
            pad: [ph, pw],
            dilation: [dh, dw],
            channels_in: cin,
            ..
        } = *self;
        let p = oh * ow;
        let cols = count * p;
        for c in 0..cin {
            for ki in 0..kh {
                for kj in 0..kw {
                    // Outputs q read input column q * sw + kj * dw - pw.
                    let shift = kj * dw;
                    let lo = pw.saturating_sub(shift).div_ceil(sw);
                    let hi = (w + pw).saturating_sub(shift).div_ceil(sw).min(ow);
                    let valid = lo.min(hi)..hi;
                    let row0 = ((c * kh + ki) * kw + kj) * cols;
                    for img in 0..count {
                        let plane = ((first + img) * cin + c) * h * w;
                        for r in 0..oh {
                            let ih = (r * sh + ki * dh).checked_sub(ph).filter(|&ih| ih < h);
                            run(Run {
                                col: row0 + img * p + r * ow,
                                row: ih.map(|ih| plane + ih * w),
                                valid: valid.clone(),
                                // q * sw + shift - pw, for q >= lo, never negative.
                                shift,
                            });
                        }
                    }
                }
            }
        }
    }

    /// The input pixel of output column `q` in a run reading `row`.
    fn pixel(&self, row: usize, q: usize, shift: usize) -> usize {
        row + q * self.stride[1] + shift - self.pad[1]
    }

    /// im2col of images `first..first + count` of `x` into `col`: row
    /// `(c, ki, kj)`, column `(image, oh, ow)`; padding reads as zero.
    ///
    /// The runs are written one after another through `col`, so short
    /// runs are copied as fixed blocks ([`copy_run`]).
    pub fn im2col<T: MathElement>(&self, x: &[T], first: usize, count: usize, col: &mut [T]) {
        if self.is_dense() {
            return self.im2col_unpadded(x, first, count, col);
        }
        let ow = self.ow;
        cpu::vectorized(
            #[inline(always)]
            || {
                self.for_each_run(first, count, |run| {
                    let Some(row) = run.row else {
                        col[run.col..run.col + ow].fill(T::ZERO);
                        return;
                    };
                    let len = run.valid.len();
                    if len > 0 {
                        let from = self.pixel(row, run.valid.start, run.shift);
                        let to = run.col + run.valid.start;
                        match self.stride[1] {
                            1 => copy_run(col, to, x, from, len),
                            step => copy_every(col, to, x, (from, step), len),
                        }
                    }
                    // After the copy: padding it ran over is zeroed here.
                    let dst = &mut col[run.col..run.col + ow];
                    if run.valid.start > 0 {
                        dst[..run.valid.start].fill(T::ZERO);
                    }
                    if run.valid.end < ow {
                        dst[run.valid.end..].fill(T::ZERO);
                    }
                })
            },
        );
    }

    /// im2col's transpose for image `image` of `x`: row `(oh, ow)` of
    /// `colt` holds the pixel's `patch` values in im2col's order
    /// (channel, kernel row, kernel column), padding as zero.
    pub(super) fn im2col_by_pixel<T: MathElement>(&self, x: &[T], image: usize, colt: &mut [T]) {
        let ([kh, kw], plane) = (self.kernel, self.h * self.w);
        let (taps, ow) = (kh * kw, self.ow);
        let patch = self.channels_in * taps;
        let colt = &mut colt[..self.oh * ow * patch];
        if plane == 0 || patch == 0 {
            colt.fill(T::ZERO);
            return;
        }
        // The input row (axis 0) or column (1) output `out` reads at tap
        // `k` of the window, if not padding.
        let input = |axis: usize, out: usize, k: usize| {
            (out * self.stride[axis] + k * self.dilation[axis])
                .checked_sub(self.pad[axis])
                .filter(|&i| i < [self.h, self.w][axis])
        };
        let x = &x[image * self.channels_in * plane..][..self.channels_in * plane];
        let mut reads = Vec::with_capacity(taps);
        for (pixel, row) in colt.chunks_exact_mut(patch).enumerate() {
            reads.clear();
            for ki in 0..kh {
                let ih = input(0, pixel / ow, ki);
                for kj in 0..kw {
                    let iw = input(1, pixel % ow, kj);
                    reads.push(ih.zip(iw).map(|(ih, iw)| ih * self.w + iw));
                }
            }
            for (channel, values) in x.chunks_exact(plane).zip(row.chunks_exact_mut(taps)) {
                for (value, read) in values.iter_mut().zip(&reads) {
                    *value = read.map_or(T::ZERO, |at| channel[at]);
                }
            }
        }
    }

    /// A dense window: stride 1, no padding or dilation. Each im2col run
    /// is then a whole output row read from one input row.
    pub(super) fn is_dense(&self) -> bool {
        self.pad == [0, 0] && self.stride == [1, 1] && self.dilation == [1, 1]
    }

    /// Calls `row(column offset, input offset)` for each run of `ow`
    /// values of a dense window's images `first..first + count`, in column
    /// order, with none of [`Self::for_each_run`]'s bookkeeping per run
    /// (LeNet's conv2 has 4,000 runs of 8 values per image).
    #[inline(always)]
    fn for_each_dense_row(&self, first: usize, count: usize, mut row: impl FnMut(usize, usize)) {
        let Self {
            h,
            w,
            oh,
            ow,
            kernel: [kh, kw],
            channels_in: cin,
            ..
        } = *self;
        let p = oh * ow;
        let cols = count * p;
        for c in 0..cin {
            for ki in 0..kh {
                for kj in 0..kw {
                    let row0 = ((c * kh + ki) * kw + kj) * cols;
                    for img in 0..count {
                        let input = ((first + img) * cin + c) * h * w + ki * w + kj;
                        for r in 0..oh {
                            row(row0 + img * p + r * ow, input + r * w);
                        }
                    }
                }
            }
        }
    }

    /// [`Self::im2col`] of a dense window.
    fn im2col_unpadded<T: MathElement>(&self, x: &[T], first: usize, count: usize, col: &mut [T]) {
        let ow = self.ow;
        cpu::vectorized(
            #[inline(always)]
            || self.for_each_dense_row(first, count, |at, from| copy_run(col, at, x, from, ow)),
        );
    }

    /// The product `weight x im2col(images first..first + count)` of a
    /// dense window into `out` (`channels_out` rows of `count * oh *
    /// ow`) with the column buffer never built whole: `cpu::gemm_filled`
    /// asks for it a panel at a time, and each panel is copied from the
    /// image while the product's kernel waits on it in cache (LeNet's
    /// conv2 spent about a quarter of its time writing its im2col, 512 KB
    /// a round of four images, and packing it again). For `f32` where
    /// that kernel is `gemm`'s (`cpu::gemm_filled_suits`); the same bits
    /// as im2col and `gemm`. Says whether it ran.
    fn product_from_image<T: MathElement>(
        &self,
        x: &[T],
        first: usize,
        count: usize,
        weight: &[T],
        out: &mut [T],
    ) -> bool {
        let (Some(x), Some(weight), Some(out)) = (as_f32(x), as_f32(weight), as_f32_mut(out))
        else {
            return false;
        };
        let (cout, n, k) = (self.channels_out, count * self.oh * self.ow, self.patch());
        if !self.is_dense() || !cpu::gemm_filled_suits(cout, n, k) {
            return false;
        }
        let fill = |rows: Range<usize>, cols: Range<usize>, panel: &mut [f32]| {
            self.fill_dense_panel(x, first, (rows, cols), panel)
        };
        cpu::gemm_filled(cout, n, k, weight, fill, 0.0, out)
    }

    /// A panel's columns `cols` as runs along output rows, each `(where
    /// it starts in a panel row, where it starts in what the taps read,
    /// length)`, the second `start(image, output row, output column)` of
    /// its first column (images counted from the product's first). A run
    /// never crosses an output row, so each tap reads it from one input
    /// row.
    pub(super) fn panel_runs(
        &self,
        cols: Range<usize>,
        start: impl Fn(usize, usize, usize) -> usize,
    ) -> PanelRuns {
        let (ow, plane) = (self.ow, self.oh * self.ow);
        let mut runs = [(0, 0, 0); cpu::PANEL_COLUMNS];
        let mut count = 0;
        let mut column = cols.start;
        while column < cols.end {
            let (img, at) = (column / plane, column % plane);
            let (r, q) = (at / ow, at % ow);
            let len = (ow - q).min(cols.end - column);
            runs[count] = (column - cols.start, start(img, r, q), len);
            count += 1;
            column += len;
        }
        (runs, count)
    }

    /// Rows `rows` (taps) and columns `cols` of im2col of a dense window
    /// into `panel`, [`cpu::PANEL_COLUMNS`] values a row: each run is a
    /// copy of adjacent input values.
    fn fill_dense_panel(
        &self,
        x: &[f32],
        first: usize,
        (rows, cols): (Range<usize>, Range<usize>),
        panel: &mut [f32],
    ) {
        let (h, w, [kh, kw]) = (self.h, self.w, self.kernel);
        let image = self.channels_in * h * w;
        // Where each run starts in the input at tap 0, the same for every
        // row (tap) of the panel.
        let (runs, count) = self.panel_runs(cols, |img, r, q| (first + img) * image + r * w + q);
        // Tap (c, ki, kj) reads the input shifted by c * h * w + ki * w + kj.
        let (mut ki, mut kj) = (rows.start / kw % kh, rows.start % kw);
        let mut shift = rows.start / (kh * kw) * h * w + ki * w + kj;
        for row in panel.chunks_exact_mut(cpu::PANEL_COLUMNS).take(rows.len()) {
            for &(to, from, len) in &runs[..count] {
                copy_run(row, to, x, from + shift, len);
            }
            kj += 1;
            shift += 1;
            if kj == kw {
                (kj, ki) = (0, ki + 1);
                shift += w - kw;
                if ki == kh {
                    ki = 0;
                    shift += h * w - kh * w;
                }
            }
        }
    }

    /// The inverse of [`Self::im2col`]: adds each column entry back onto
    /// the input pixel it was copied from (padding takes nothing).
    pub fn col2im_add<T: MathElement>(&self, col: &[T], first: usize, count: usize, dx: &mut [T]) {
        if self.is_dense() {
            return self.col2im_add_unpadded(col, first, count, dx);
        }
        self.for_each_run(first, count, |run| {
            let Some(row) = run.row else { return };
            for q in run.valid {
                dx[self.pixel(row, q, run.shift)] += col[run.col + q];
            }
        });
    }

    /// [`Self::col2im_add`] onto `count` images of nothing: the column
    /// gradient of a round written into its images' input gradient (by
    /// `cpu::col2im_dense` for `f32` dense windows on AVX-512, which sums
    /// each row in registers; zeroed and added run by run elsewhere, the
    /// same bits).
    fn col2im_set<T: MathElement>(&self, col: &[T], count: usize, dx: &mut [T]) {
        let window = cpu::DenseWindow {
            channels: self.channels_in,
            input: [self.h, self.w],
            kernel: self.kernel,
        };
        if self.is_dense()
            && let (Some(col), Some(dx)) = (as_f32(col), as_f32_mut(dx))
            && cpu::col2im_dense(col, window, count, dx)
        {
            return;
        }
        dx.fill(T::ZERO);
        self.col2im_add(col, 0, count, dx);
    }

    /// [`Self::col2im_add`] of a dense window, each run a whole output row
    /// added onto one input row (as [`Self::im2col_unpadded`] reads them).
    fn col2im_add_unpadded<T: MathElement>(
        &self,
        col: &[T],
        first: usize,
        count: usize,
        dx: &mut [T],
    ) {
        let ow = self.ow;
        cpu::vectorized(
            #[inline(always)]
            || {
                self.for_each_dense_row(first, count, |from, to| {
                    for (d, &v) in dx[to..][..ow].iter_mut().zip(&col[from..][..ow]) {
                        *d += v;
                    }
                })
            },
        );
    }

    /// Whether the host's pass over this geometry's images can write each
    /// at a stride other than its own size ([`forward`]'s `stride`): all
    /// but a window over the whole input of several images, whose images
    /// are the rows of one product.
    pub(super) fn writes_at_stride(&self) -> bool {
        self.batch == 1 || !(self.is_dense() && self.oh * self.ow == 1)
    }

    /// Images per im2col + gemm round: enough columns for gemm to run at
    /// speed, few enough that the column buffer stays in the core's cache
    /// (a whole-batch im2col of conv2 at batch 1000 is 128 MB and leaves
    /// gemm waiting on memory).
    fn images_per_round(&self) -> usize {
        const COLUMN_BUFFER_FLOATS: usize = 1 << 17;
        let per_image = (self.patch() * self.oh * self.ow).max(1);
        (COLUMN_BUFFER_FLOATS / per_image).clamp(1, self.batch.max(1))
    }

    /// Input channels an image's input gradient takes at a time, where it
    /// is made image by image (see [`input_gradient`]): as many as fit the
    /// column gradient in 8,192 values (L1, for `f32`), a multiple of the
    /// four channels `cpu::col2im_dense` sums side by side (LeNet's conv2:
    /// 4 channels, 6,400 values; 8 ran 3% slower a training step). `None`
    /// (the gradient of a round of images at once) where fewer than four
    /// fit or a plane has fewer outputs than a gemm panel's columns:
    /// products that thin ran slower than the round's (MTCNN O-Net's
    /// conv1, conv2 and conv4 backward 8.0, 24.0, 1.0 ms -> 10.9, 26.9,
    /// 1.9 ms at batch 64).
    fn input_gradient_block(&self) -> Option<usize> {
        const BLOCK_FLOATS: usize = 1 << 13;
        const COL2IM_CHANNELS: usize = 4;
        let plane = self.oh * self.ow;
        let per_channel = (self.kernel[0] * self.kernel[1] * plane).max(1);
        let block = (BLOCK_FLOATS / per_channel).min(self.channels_in);
        let block = block - block % COL2IM_CHANNELS;
        (block > 0 && plane >= cpu::PANEL_COLUMNS).then_some(block)
    }
}

/// Reusable buffers of a convolution's CPU passes: one set per part of the
/// batch, as the parts run on their own cores.
#[derive(Default)]
pub(crate) struct ConvScratch<T> {
    parts: Vec<PartScratch<T>>,
    /// The weights transposed, `(cin * kh * kw, cout)`, for the input
    /// gradient's products.
    weight_t: AlignedVec<T>,
}

/// One part's buffers: the column buffer and gemm output of a round, the
/// column gradient, and the part's own weight and bias gradients (summed
/// into the layer's after the parts finish), the bias gradient first as
/// one sum per output position (`db_planes`).
#[derive(Default)]
struct PartScratch<T> {
    col: AlignedVec<T>,
    tmp: AlignedVec<T>,
    dcol: AlignedVec<T>,
    dw: AlignedVec<T>,
    db: AlignedVec<T>,
    db_planes: AlignedVec<T>,
}

impl<T: Copy + Default + 'static> PartScratch<T> {
    /// Grows the buffers a forward pass over `g` needs, before the parts
    /// run: a refusal (the host memory limit) fails the whole pass, not
    /// one core's share of it.
    fn reserve_forward(&mut self, g: &ConvGeometry) -> Result<()>
    where
        T: 'static,
    {
        if g.is_pointwise() {
            return Ok(());
        }
        if g.takes_pixel_dots::<T>() {
            return ensure(&mut self.col, g.patch().saturating_mul(g.oh * g.ow));
        }
        // One image's column buffer where the weights are packed (see
        // `forward_part`).
        let packed_col = if g.takes_packed_weights::<T>() {
            g.patch().saturating_mul(g.oh * g.ow)
        } else {
            0
        };
        if let Some(direct) = g.direct::<T>() {
            return ensure(&mut self.col, direct.scratch_size(1).max(packed_col));
        }
        let round = g.images_per_round();
        let cols = round.saturating_mul(g.oh * g.ow);
        let col = match g.phase_copies::<T>() {
            Some(copies) => copies.scratch_size(round),
            None => g.patch().saturating_mul(cols),
        };
        ensure(&mut self.col, col.max(packed_col))?;
        ensure(&mut self.tmp, g.channels_out.saturating_mul(cols))
    }

    /// [`reserve_forward`](Self::reserve_forward)'s twin for a backward
    /// pass, with the column gradient when the input's is wanted.
    fn reserve_backward(&mut self, g: &ConvGeometry, input_gradient: bool) -> Result<()> {
        let (cout, ckk) = (g.channels_out, g.patch());
        let round = g.images_per_round();
        let cols = round.saturating_mul(g.oh * g.ow);
        let col = match (g.direct_gradient::<T>(), g.direct::<T>()) {
            (Some(direct), _) => direct.scratch_size(direct.images_per_round(g.batch)),
            (None, Some(deep)) => ckk.saturating_mul(cols).max(deep.scratch_size(round)),
            (None, None) => ckk.saturating_mul(cols),
        };
        ensure(&mut self.col, col)?;
        ensure(&mut self.tmp, cout.saturating_mul(cols))?;
        ensure(&mut self.dw, cout.saturating_mul(ckk))?;
        ensure(&mut self.db, cout)?;
        ensure(&mut self.db_planes, cout.saturating_mul(g.oh * g.ow))?;
        if input_gradient {
            let rows = match g.input_gradient_block() {
                Some(block) => block * g.kernel[0] * g.kernel[1],
                None => ckk.saturating_mul(round),
            };
            ensure(&mut self.dcol, rows.saturating_mul(g.oh * g.ow))?;
        }
        Ok(())
    }
}

impl<T: Send> ConvScratch<T> {
    /// Splits the batch into one run of images per core (Caffe splits
    /// nothing and leaves the cores to a threaded BLAS, whose gemms are too
    /// small here to share: LeNet's conv2 is 50 x 256 x 500 per round).
    /// Returns the images per part, the parts' buffers and the weights
    /// as the backward pass last transposed them.
    fn parts(&mut self, batch: usize) -> (usize, &mut [PartScratch<T>], &[T])
    where
        PartScratch<T>: Default,
    {
        let parts = cpu::cores().clamp(1, batch.max(1));
        let per_part = batch.div_ceil(parts).max(1);
        let parts = batch.div_ceil(per_part).max(1);
        if self.parts.len() < parts {
            self.parts.resize_with(parts, PartScratch::default);
        }
        (per_part, &mut self.parts[..parts], &self.weight_t)
    }

    /// The buffers of `parts` parts of one image, each grown for a
    /// forward pass over `g` (a core's share).
    fn image_parts(&mut self, parts: usize, g: &ConvGeometry) -> Result<&mut [PartScratch<T>]>
    where
        T: Copy + Default + 'static,
    {
        if self.parts.len() < parts {
            self.parts.resize_with(parts, PartScratch::default);
        }
        for s in &mut self.parts[..parts] {
            s.reserve_forward(g)?;
        }
        Ok(&mut self.parts[..parts])
    }
}

/// What a forward pass does to each output after its product: the
/// channel's bias added, and then, where a net folded the in-place
/// activation after the convolution into it (ReLU, leaky or not, ReLU6),
/// that activation in the same pass over the output, rather than a pass
/// of its own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Finish<'a, T> {
    pub bias: &'a [T],
    pub activation: Option<Activation>,
}

/// `dst[i] = f(src[i])`, for one `f` known at compile time (a variant's),
/// so that the loop vectorises.
#[inline(always)]
fn map_into<T: Copy>(src: &[T], dst: &mut [T], f: impl Fn(T) -> T) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = f(v);
    }
}

/// `values[i] = f(values[i])`, every value stored
/// ([`cpu::map_whole_in_place`]: AVX2's masked stores are slow).
#[inline(always)]
fn map_in_place<T: Copy>(values: &mut [T], f: impl Fn(T) -> T) {
    cpu::map_whole_in_place(values, f);
}

impl<'a, T: MathElement> Finish<'a, T> {
    /// The finish of output channels `first..first + count`.
    pub(crate) fn channels(self, first: usize, count: usize) -> Self {
        Finish {
            bias: &self.bias[first..][..count],
            ..self
        }
    }

    /// `dst[i] = src[i] + b`, finished: a run of a channel whose bias
    /// is `b`. The choice of activation stays outside the loop, which the
    /// compiler then vectorises.
    #[inline(always)]
    pub(crate) fn apply(self, b: T, src: &[T], dst: &mut [T]) {
        match self.activation {
            None => map_into(src, dst, |v| v + b),
            Some(Activation::Relu) => map_into(src, dst, |v| Rectify::apply(v + b)),
            Some(Activation::Relu6) => map_into(src, dst, |v| relu6(v + b)),
            Some(Activation::LeakyRelu { negative_slope }) => {
                map_into(src, dst, |v| leaky(negative_slope, v + b))
            }
        }
    }

    /// [`apply`](Self::apply) in place.
    #[inline(always)]
    pub(crate) fn apply_in_place(self, b: T, values: &mut [T]) {
        match self.activation {
            None => map_in_place(values, |v| v + b),
            Some(Activation::Relu) => map_in_place(values, |v| Rectify::apply(v + b)),
            Some(Activation::Relu6) => map_in_place(values, |v| relu6(v + b)),
            Some(Activation::LeakyRelu { negative_slope }) => {
                map_in_place(values, |v| leaky(negative_slope, v + b))
            }
        }
    }

    /// The activation alone, over outputs whose bias is already in them.
    pub(crate) fn activate(self, y: &mut [T]) {
        let Some(activation) = self.activation else {
            return;
        };
        cpu::vectorized(
            #[inline(always)]
            || match activation {
                Activation::Relu => map_in_place(y, Rectify::apply),
                Activation::Relu6 => map_in_place(y, relu6),
                Activation::LeakyRelu { negative_slope } => {
                    map_in_place(y, |v| leaky(negative_slope, v))
                }
            },
        );
    }
}

/// `y = conv(x) + bias`, finished as `finish` says, `weight` `(cout,
/// cin, kh, kw)`; `packed`, the weights packed where the layer
/// [`takes packed weights`](ConvGeometry::takes_packed_weights). Image
/// `n`'s output goes to `y[n * stride..]`: `stride` is one image's
/// output where `y` is the layer's top, more where each image is a run of
/// a larger blob's (a Concat's top, its other channels left as they are).
/// A window over the whole input (one output per channel) takes its
/// images together and writes them packed alone
/// ([`writes_at_stride`](ConvGeometry::writes_at_stride)).
pub(crate) fn forward<T: MathElement>(
    g: &ConvGeometry,
    scratch: &mut ConvScratch<T>,
    x: &[T],
    (weight, packed): (&[T], Option<&[f32]>),
    bias: Finish<'_, T>,
    (y, stride): (&mut [T], usize),
) -> Result<()> {
    let per_image = g.channels_out * g.oh * g.ow;
    assert!(
        stride == per_image || g.writes_at_stride(),
        "a window over the whole input writes its images packed"
    );
    if g.batch == 0 || per_image == 0 {
        return Ok(());
    }
    let y = &mut y[..(g.batch - 1) * stride + per_image];
    if g.batch == 1 && packed.is_none() && split_rows::<T>(g) {
        return forward_rows(g, scratch, x, weight, bias, y);
    }
    if g.batch == 1 && packed.is_none() && split_channels(g, g.takes_phase_copies::<T>()) {
        return forward_channels(g, scratch, x, weight, bias, y);
    }
    let (per_part, parts, _) = scratch.parts(g.batch);
    for s in parts.iter_mut() {
        s.reserve_forward(g)?;
    }
    if let [only] = parts {
        // One part (one image, or one core): no task to hand out.
        forward_part(
            g,
            only,
            x,
            (weight, packed),
            bias,
            (0, g.batch),
            (y, stride),
        );
        return Ok(());
    }
    let items = y
        .chunks_mut(per_part * stride)
        .zip(parts.iter_mut())
        .enumerate();
    cpu::on_cores(items, |(i, (y, s))| {
        let first = i * per_part;
        let count = per_part.min(g.batch - first);
        forward_part(g, s, x, (weight, packed), bias, (first, count), (y, stride));
    });
    Ok(())
}

/// Multiply-adds of one image from which its output channels are cut
/// across the cores.
const CHANNEL_SPLIT_MIN: usize = 1 << 18;

/// The largest column buffer, in values, that each core makes for itself
/// when one image's channels are cut: small layers' (MTCNN's, 13-57 K).
/// Above it, making it twice costs more than the cut saves (ResNet-50 at
/// batch 1, two threads: 55-58 -> 62-66 ms with every layer cut so), and
/// cpu::gemm cuts the product of one shared buffer instead.
const CHANNEL_SPLIT_MAX_COLUMNS: usize = 1 << 16;

/// Whether one image's pass is cut by output channels: two cores or
/// more, enough work but a small column buffer (never a 1x1 layer's,
/// whose input is its buffer) or the image's phase copies (about the
/// image's size, made by each core), and at least 8 channels (a gemm
/// kernel's rows) a core.
fn split_channels(g: &ConvGeometry, phase_copies: bool) -> bool {
    let work = g.channels_out * g.oh * g.ow * g.patch();
    cpu::cores() > 1
        && !g.is_pointwise()
        && work >= CHANNEL_SPLIT_MIN
        && (phase_copies || g.patch() * g.oh * g.ow <= CHANNEL_SPLIT_MAX_COLUMNS)
        && g.channels_out >= 16
}

/// Whether one image's pass taken directly ([`ConvGeometry::direct`])
/// is cut into bands of output rows: two cores or more, enough work
/// ([`CHANNEL_SPLIT_MIN`]) and two rows a core.
fn split_rows<T: 'static>(g: &ConvGeometry) -> bool {
    let work = g.channels_out * g.oh * g.ow * g.patch();
    let cores = cpu::cores();
    cores > 1 && work >= CHANNEL_SPLIT_MIN && g.oh >= 2 * cores && g.direct::<T>().is_some()
}

/// [`forward`] of one image taken directly, its output rows cut into
/// one band per core, each core making the shifted copies its band
/// reads and computing every channel of it. Cut by channels, each core
/// made all of the copies, and MobileNet-SSD's conv0 (32 channels, 150
/// x 150 outputs from 18 copies of 151 x 150) ran 1.26x faster on two
/// cores than on one. Cut by rows, two Zen 3 cores (AVX2, 2026-12-04,
/// medians of 5-8 alternating runs in the nets, ms): that conv0 0.77 ->
/// 0.57, SqueezeNet's conv1 0.67 -> 0.50 and its expand3x3 layers 9-15%
/// (the pass 7.41 -> 6.68), ResNet-50's and GoogLeNet's 7 x 7 conv1 2.17
/// -> 1.84 and 2.10 -> 1.78; one core within 2-3% either way.
fn forward_rows<T: MathElement>(
    g: &ConvGeometry,
    scratch: &mut ConvScratch<T>,
    x: &[T],
    weight: &[T],
    bias: Finish<'_, T>,
    y: &mut [T],
) -> Result<()> {
    let per_part = g.oh.div_ceil(cpu::cores());
    let parts = g.oh.div_ceil(per_part);
    let scratch = scratch.image_parts(parts, g)?;
    // Band i of every channel's plane goes to part i.
    let (plane, band) = (g.oh * g.ow, per_part * g.ow);
    let mut runs: Vec<Vec<&mut [T]>> = (0..parts)
        .map(|_| Vec::with_capacity(g.channels_out))
        .collect();
    for channel in y[..g.channels_out * plane].chunks_exact_mut(plane) {
        for (part, run) in runs.iter_mut().zip(channel.chunks_mut(band)) {
            part.push(run);
        }
    }
    let items = runs.into_iter().zip(scratch).enumerate();
    cpu::on_cores(items, |(i, (mut runs, s))| {
        let rows = i * per_part..g.oh.min((i + 1) * per_part);
        super::direct::forward_rows(g, (x, weight, bias), rows, &mut runs, &mut s.col);
    });
    Ok(())
}

/// [`forward`] of one image, its output channels cut into one run per
/// core. Each core makes the column buffer itself: the input is small
/// next to that buffer, which a core would otherwise read from the cache
/// of the core that wrote it (R-Net's conv2, 48 x 81 x 252, ran slower
/// cut that way than on one core).
fn forward_channels<T: MathElement>(
    g: &ConvGeometry,
    scratch: &mut ConvScratch<T>,
    x: &[T],
    weight: &[T],
    bias: Finish<'_, T>,
    y: &mut [T],
) -> Result<()> {
    let cores = cpu::cores();
    let per_part = g.channels_out.div_ceil(cores).next_multiple_of(8);
    let parts = g.channels_out.div_ceil(per_part);
    let (p, ckk) = (g.oh * g.ow, g.patch());
    let sub = |channels: usize| ConvGeometry {
        channels_out: channels,
        ..*g
    };
    let scratch = scratch.image_parts(parts, &sub(per_part))?;
    let items = y[..g.channels_out * p]
        .chunks_mut(per_part * p)
        .zip(scratch)
        .enumerate();
    cpu::on_cores(items, |(i, (y, s))| {
        let (first, channels) = (i * per_part, y.len() / p.max(1));
        let w = &weight[first * ckk..][..channels * ckk];
        forward_part(
            &sub(channels),
            s,
            x,
            (w, None),
            bias.channels(first, channels),
            (0, 1),
            (y, channels * p),
        );
    });
    Ok(())
}

/// A grouped convolution's forward pass: each (image, group) pair a
/// convolution of `sub` (one image, one group's channels) on its own
/// slices of `x`, the weights, the bias and `y`, the pairs shared across
/// cores (one gemm per pair is too small to split well: CaffeNet's conv2
/// is 128 x 729 x 1200).
#[allow(clippy::too_many_arguments)]
pub(crate) fn forward_groups<T: MathElement>(
    sub: &ConvGeometry,
    groups: usize,
    batch: usize,
    scratch: &mut ConvScratch<T>,
    x: &[T],
    weight: &[T],
    bias: Finish<'_, T>,
    y: &mut [T],
) -> Result<()> {
    let units = batch * groups;
    let xs = sub.channels_in * sub.h * sub.w;
    let ys = sub.channels_out * sub.oh * sub.ow;
    let ws = sub.channels_out * sub.patch();
    let bs = sub.channels_out;
    if units == 0 || ys == 0 {
        return Ok(());
    }
    let (per_part, parts, _) = scratch.parts(units);
    for s in parts.iter_mut() {
        s.reserve_forward(sub)?;
    }
    let items = y[..units * ys]
        .chunks_mut(per_part * ys)
        .zip(parts.iter_mut())
        .enumerate();
    cpu::on_cores(items, |(p, (y, s))| {
        for (k, yu) in y.chunks_mut(ys).enumerate() {
            let u = p * per_part + k;
            let gi = u % groups;
            let w = &weight[gi * ws..][..ws];
            let b = bias.channels(gi * bs, bs);
            forward_part(sub, s, &x[u * xs..][..xs], (w, None), b, (0, 1), (yu, ys));
        }
    });
    Ok(())
}

/// [`forward`] of images `first..first + count`, into `y` (theirs alone,
/// each `stride` values after the one before).
fn forward_part<T: MathElement>(
    g: &ConvGeometry,
    s: &mut PartScratch<T>,
    x: &[T],
    (weight, packed): (&[T], Option<&[f32]>),
    bias: Finish<'_, T>,
    (first, count): (usize, usize),
    (y, stride): (&mut [T], usize),
) {
    let (cout, p, ckk) = (g.channels_out, g.oh * g.ow, g.patch());
    if g.takes_pixel_dots::<T>() {
        // An output of a few pixels over a deep window (SSD's last
        // layers): each pixel's window gathered as a row, and the weights
        // read once where they lie, row by row, as dots against them
        // (`cpu::gemm_few_columns_as_dots`).
        let colt = &mut s.col[..p * ckk];
        for img in 0..count {
            g.im2col_by_pixel(x, first + img, colt);
            let yi = &mut y[img * stride..][..cout * p];
            cpu::gemm(
                Transpose::No,
                Transpose::Yes,
                cout,
                p,
                ckk,
                T::ONE,
                weight,
                colt,
                T::ZERO,
                yi,
            );
            add_bias(yi, bias, p);
        }
        return;
    }
    if packed.is_some() && !g.is_pointwise() {
        // A small plane (fewer than four gemm panels' columns), from packed
        // weights (`takes_packed_weights`): each image's im2col, then the
        // transposed product, which cuts its panels across the cores.
        let col = &mut s.col[..ckk * p];
        for img in 0..count {
            g.im2col(x, first + img, 1, col);
            let yi = &mut y[img * stride..][..cout * p];
            image_product((weight, packed), (cout, p, ckk), col, bias, yi);
        }
        return;
    }
    if g.direct::<T>().is_some() {
        let operands = (x, weight, bias);
        super::direct::forward(g, operands, (first, count), (y, stride), &mut s.col);
        return;
    }
    if g.is_dense() && p == 1 {
        // A window over the whole input (a classifier written as a
        // convolution: MTCNN P-Net's conv3 at 12 x 12): each image is its
        // own column, and the batch's product is an inner product's, `y =
        // x W^T` (a gemv for one image). As a panel of 32 output columns
        // with one used, P-Net's conv3 took 3.7 us; as im2col and a gemv,
        // 1.9; so, 1.0.
        let xs = &x[first * ckk..][..count * ckk];
        let ys = &mut y[..count * cout];
        cpu::gemm(
            Transpose::No,
            Transpose::Yes,
            count,
            cout,
            ckk,
            T::ONE,
            xs,
            weight,
            T::ZERO,
            ys,
        );
        for yi in ys.chunks_exact_mut(cout) {
            add_bias(yi, bias, 1);
        }
        return;
    }
    if g.is_pointwise() {
        // A 1x1 window at stride 1 without padding: each image is its own
        // column buffer, and the gemm writes the image's output in place.
        let cin = g.channels_in;
        for img in 0..count {
            let xi = &x[(first + img) * cin * p..][..cin * p];
            let yi = &mut y[img * stride..][..cout * p];
            image_product((weight, packed), (cout, p, cin), xi, bias, yi);
        }
        return;
    }
    let round = g.images_per_round();
    let phase_copies = g.phase_copies::<T>();
    for start in (0..count).step_by(round) {
        let n = round.min(count - start);
        let cols = n * p;
        // One image: the product's (cout, p) is the image's layout.
        let out = if n == 1 {
            &mut y[start * stride..][..cout * p]
        } else {
            &mut s.tmp[..cout * cols]
        };
        let images = (first + start, n);
        if let Some(copies) = &phase_copies {
            super::phase_copies::product(g, copies, (x, weight), images, out, &mut s.col);
        } else if !g.product_from_image(x, first + start, n, weight, out) {
            g.im2col(x, first + start, n, &mut s.col);
            let col = &s.col[..ckk * cols];
            if n == 1 && product_finished(weight, (cout, cols, ckk), col, bias, out) {
                continue;
            }
            cpu::gemm(
                Transpose::No,
                Transpose::No,
                cout,
                cols,
                ckk,
                T::ONE,
                weight,
                col,
                T::ZERO,
                out,
            );
        }
        if n == 1 {
            add_bias(&mut y[start * stride..][..cout * p], bias, p);
        } else {
            add_bias_by_image(g, &s.tmp[..cout * cols], bias, (start, n), (y, stride));
        }
    }
}

/// One image's `y = W col + bias`, finished (`W` of `cout x ckk`, `col`
/// of `ckk x p`), from the packed weights where there are some.
fn image_product<T: MathElement>(
    (weight, packed): (&[T], Option<&[f32]>),
    (cout, p, ckk): (usize, usize, usize),
    col: &[T],
    bias: Finish<'_, T>,
    y: &mut [T],
) {
    if packed.is_none() && product_finished(weight, (cout, p, ckk), col, bias, y) {
        return;
    }
    if !product_from_packed(packed, (cout, p, ckk), col, y) {
        cpu::gemm(
            Transpose::No,
            Transpose::No,
            cout,
            p,
            ckk,
            T::ONE,
            weight,
            col,
            T::ZERO,
            y,
        );
    }
    add_bias(y, bias, p);
}

/// `y = W col + bias`, finished (`W` of `cout x ckk`, `col` of `ckk x
/// p`), each value finished as the kernel stores it
/// ([`cpu::gemm_finished`]): f32 layers whose activation is none, ReLU
/// or ReLU6, on AVX-512 or AVX2. A pass of its own over the output took
/// 8.6% of the time of MobileNet-SSD's conv1 (64 x 22,500, `perf`'s
/// samples). Says whether it ran.
fn product_finished<T: MathElement>(
    weight: &[T],
    (cout, p, ckk): (usize, usize, usize),
    col: &[T],
    finish: Finish<'_, T>,
    y: &mut [T],
) -> bool {
    let Some(rectifier) = rectifier_of(finish.activation) else {
        return false;
    };
    let (Some(weight), Some(col), Some(bias), Some(y)) = (
        as_f32(weight),
        as_f32(col),
        as_f32(finish.bias),
        as_f32_mut(y),
    ) else {
        return false;
    };
    bias.len() >= cout
        && cpu::gemm_finished(
            cout,
            p,
            ckk,
            weight,
            col,
            cpu::RowFinish {
                bias,
                shortcut: None,
                rectifier,
            },
            y,
        )
}

/// The rectifier the gemm's stores apply for `activation`; `None` for a
/// leaky ReLU, whose product in double stays in a pass of its own.
pub(super) fn rectifier_of(activation: Option<Activation>) -> Option<cpu::Rectifier> {
    match activation {
        None => Some(cpu::Rectifier::None),
        Some(Activation::Relu) => Some(cpu::Rectifier::Relu),
        Some(Activation::Relu6) => Some(cpu::Rectifier::Relu6),
        Some(Activation::LeakyRelu { .. }) => None,
    }
}

/// A 1x1 layer's (stride 1, no padding) `y = act(shortcut + W x +
/// bias)`, image by image, each value finished as the gemm stores it
/// ([`product_finished`]'s product, so its bits, and the shortcut added
/// in Caffe's Eltwise order: `first` where it is the sum's first
/// bottom). Says whether it ran; where it did not, it wrote nothing.
pub(crate) fn forward_pointwise_shortcut<T: MathElement>(
    g: &ConvGeometry,
    (x, weight): (&[T], &[T]),
    finish: Finish<'_, T>,
    (shortcut, first): (&[T], bool),
    y: &mut [T],
) -> bool {
    let (cin, cout, p) = (g.channels_in, g.channels_out, g.oh * g.ow);
    let Some(rectifier) = rectifier_of(finish.activation) else {
        return false;
    };
    let (Some(x), Some(weight), Some(bias), Some(shortcut), Some(y)) = (
        as_f32(x),
        as_f32(weight),
        as_f32(finish.bias),
        as_f32(shortcut),
        as_f32_mut(y),
    ) else {
        return false;
    };
    let out = g.batch * cout * p;
    if !g.is_pointwise()
        || bias.len() < cout
        || x.len() < g.batch * cin * p
        || weight.len() < cout * cin
        || shortcut.len() < out
        || y.len() < out
    {
        return false;
    }
    for img in 0..g.batch {
        let at = img * cout * p;
        let finish = cpu::RowFinish {
            bias,
            shortcut: Some(cpu::Shortcut {
                values: &shortcut[at..][..cout * p],
                first,
            }),
            rectifier,
        };
        let xi = &x[img * cin * p..][..cin * p];
        // Whether the kernel takes the product depends on its shape
        // alone: the first image's answer is every image's.
        if !cpu::gemm_finished(cout, p, cin, weight, xi, finish, &mut y[at..][..cout * p]) {
            debug_assert_eq!(img, 0, "one shape, one answer");
            return false;
        }
    }
    true
}

/// `y = W x` (`W` of `m x k`, packed; `x` of `k x n`) through
/// `cpu::gemm_packed`; says whether it ran (`packed` is `Some` only for
/// `f32` layers that take packed weights, on AVX-512 or AVX2).
fn product_from_packed<T: 'static>(
    packed: Option<&[f32]>,
    (m, n, k): (usize, usize, usize),
    x: &[T],
    y: &mut [T],
) -> bool {
    const F32: &str = "weights are packed for f32 alone";
    let Some(packed) = packed else {
        return false;
    };
    let (x, y) = (as_f32(x).expect(F32), as_f32_mut(y).expect(F32));
    cpu::gemm_packed(m, n, k, packed, x, y)
}

/// `tmp`, the `(cout, image, p)` product of images `start..start + n` of
/// a part, into `y` as `(image, cout, p)`, each image `stride` values
/// after the one before, the bias added.
fn add_bias_by_image<T: MathElement>(
    g: &ConvGeometry,
    tmp: &[T],
    finish: Finish<'_, T>,
    (start, n): (usize, usize),
    (y, stride): (&mut [T], usize),
) {
    let p = g.oh * g.ow;
    let cols = n * p;
    cpu::vectorized(
        #[inline(always)]
        || {
            for img in 0..n {
                for (co, &b) in finish.bias.iter().enumerate() {
                    let src = &tmp[co * cols + img * p..][..p];
                    let dst = &mut y[(start + img) * stride + co * p..][..p];
                    finish.apply(b, src, dst);
                }
            }
        },
    );
}

/// `y[co, p] += bias[co]` over one image's `(cout, p)` output, then the
/// ReLU where `finish` has it, in the same pass.
fn add_bias<T: MathElement>(y: &mut [T], finish: Finish<'_, T>, p: usize) {
    cpu::vectorized(
        #[inline(always)]
        || {
            for (plane, &b) in y.chunks_exact_mut(p.max(1)).zip(finish.bias) {
                finish.apply_in_place(b, plane);
            }
        },
    );
}

/// The gradients a backward pass computes, each when asked for: weight
/// and bias diffs (accumulated), and the input diff (overwritten).
pub(crate) struct ConvGradients<'a, T> {
    pub weight: Option<&'a mut [T]>,
    pub bias: Option<&'a mut [T]>,
    pub input: Option<&'a mut [T]>,
}

/// Caffe's `Backward_cpu`: recomputes the im2col of `x` rather than
/// keeping the forward pass's. Each part of the batch sums its own weight
/// and bias gradients, added to the layer's in part order, so the result
/// does not depend on which core finished first.
pub(crate) fn backward<T: MathElement>(
    g: &ConvGeometry,
    scratch: &mut ConvScratch<T>,
    x: &[T],
    weight: &[T],
    dy: &[T],
    grads: ConvGradients<'_, T>,
) -> Result<()> {
    let ConvGradients {
        weight: mut dw,
        bias: mut db,
        input: dx,
    } = grads;
    let in_image = g.channels_in * g.h * g.w;
    // No images, nothing to add: a part that did not run would add what
    // its buffers kept from an earlier batch.
    if g.batch == 0 {
        return Ok(());
    }
    let input_gradient = dx.is_some() && in_image > 0;
    if input_gradient && g.input_gradient_block().is_some() {
        let (cout, ckk) = (g.channels_out, g.patch());
        ensure(&mut scratch.weight_t, cout * ckk)?;
        cpu::transpose(&weight[..cout * ckk], [cout, ckk], &mut scratch.weight_t);
    }
    let (per_part, parts, weight_t) = scratch.parts(g.batch);
    for s in parts.iter_mut() {
        s.reserve_backward(g, input_gradient)?;
    }
    let wanted = (dw.is_some(), db.is_some());
    let work = |i: usize, s: &mut PartScratch<T>, dx: Option<&mut [T]>| {
        let first = i * per_part;
        let count = per_part.min(g.batch - first);
        backward_part(g, s, (x, weight, weight_t), dy, first, count, wanted, dx);
    };
    // An input with no values (a 0-wide image, all padding) has no
    // gradient to write, and cutting it would give no part to run.
    match dx.filter(|_| in_image > 0) {
        Some(dx) => {
            let items = dx[..g.batch * in_image]
                .chunks_mut((per_part * in_image).max(1))
                .zip(parts.iter_mut())
                .enumerate();
            cpu::on_cores(items, |(i, (dx, s))| work(i, s, Some(dx)));
        }
        None => cpu::on_cores(parts.iter_mut().enumerate(), |(i, s)| work(i, s, None)),
    }
    for s in parts.iter() {
        if let Some(dw) = dw.as_deref_mut() {
            cpu::axpy(T::ONE, &s.dw[..dw.len()], dw);
        }
        if let Some(db) = db.as_deref_mut() {
            cpu::axpy(T::ONE, &s.db[..db.len()], db);
        }
    }
    Ok(())
}

/// [`backward`] of images `first..first + count`: the part's weight and
/// bias gradients into `s.dw`, `s.db` (overwritten) where `wanted`, the
/// input gradient of those images into `dx` (theirs alone).
#[allow(clippy::too_many_arguments)]
fn backward_part<T: MathElement>(
    g: &ConvGeometry,
    s: &mut PartScratch<T>,
    (x, weight, weight_t): (&[T], &[T], &[T]),
    dy: &[T],
    first: usize,
    count: usize,
    (want_dw, want_db): (bool, bool),
    mut dx: Option<&mut [T]>,
) {
    let (cout, p, ckk) = (g.channels_out, g.oh * g.ow, g.patch());
    let in_image = g.channels_in * g.h * g.w;
    let block = g.input_gradient_block();
    let round = g.images_per_round();
    // A shallow layer's weight gradient read from the images' shifted
    // copies (as its forward pass), in rounds of its own, with no im2col
    // or gemm.
    let direct = g.direct_gradient::<T>().filter(|_| want_dw);
    // A deeper one's gemm reads its im2col from the same copies, where
    // that gemm runs (for a whole round, so for a shorter last one too).
    let deep_direct = g
        .direct::<T>()
        .filter(|_| want_dw && direct.is_none() && cpu::gemm_filled_suits(cout, ckk, round * p));
    s.dw[..cout * ckk].fill(T::ZERO);
    if want_db {
        s.db_planes[..cout * p].fill(T::ZERO);
    }
    if let Some(direct) = &direct {
        let images = direct.images_per_round(count);
        for start in (0..count).step_by(images) {
            let n = images.min(count - start);
            let dy_round = &dy[(first + start) * cout * p..][..n * cout * p];
            let dw = &mut s.dw[..cout * ckk];
            let round = (first + start, n);
            super::direct::weight_gradient(g, direct, (x, dy_round), round, dw, &mut s.col);
        }
    }
    for start in (0..count).step_by(round) {
        let n = round.min(count - start);
        let cols = n * p;
        let dy_round = &dy[(first + start) * cout * p..][..n * cout * p];
        if want_db {
            // Each output's gradient summed over the images, one pass an
            // image; each plane is summed once, after the last round (a
            // sum a plane and image cost 40 ns, for conv2's planes of 64).
            for image in dy_round.chunks_exact((cout * p).max(1)) {
                cpu::add_inplace(&mut s.db_planes[..cout * p], image);
            }
        }
        // The gemms' operand: the round's output gradient as (cout, image, p).
        let gemm_dw = want_dw && direct.is_none();
        let round_dx = block.is_none() && dx.is_some();
        if !gemm_dw && !round_dx {
            continue;
        }
        let tmp = &mut s.tmp[..cout * cols];
        for (i, plane) in dy_round.chunks_exact(p.max(1)).enumerate() {
            let (img, co) = (i / cout, i % cout);
            tmp[co * cols + img * p..][..p].copy_from_slice(plane);
        }
        if let Some(direct) = deep_direct.as_ref().filter(|_| gemm_dw) {
            super::direct::weight_gradient_product(
                g,
                direct,
                (x, &*tmp),
                (first + start, n),
                &mut s.dw[..cout * ckk],
                &mut s.col,
            );
        } else if gemm_dw {
            g.im2col(x, first + start, n, &mut s.col);
            cpu::gemm(
                Transpose::No,
                Transpose::Yes,
                cout,
                ckk,
                cols,
                T::ONE,
                tmp,
                &s.col[..ckk * cols],
                T::ONE,
                &mut s.dw[..cout * ckk],
            );
        }
        let Some(dx) = dx.as_deref_mut().filter(|_| round_dx) else {
            continue;
        };
        // dcol = W^T dy, then col2im into the part's input diff.
        let dcol = &mut s.dcol[..ckk * cols];
        cpu::gemm(
            Transpose::Yes,
            Transpose::No,
            ckk,
            cols,
            cout,
            T::ONE,
            weight,
            tmp,
            T::ZERO,
            dcol,
        );
        g.col2im_set(dcol, n, &mut dx[start * in_image..][..n * in_image]);
    }
    if let (Some(dx), Some(block)) = (dx, block) {
        let dy = &dy[first * cout * p..][..count * cout * p];
        input_gradient(g, block, (weight_t, dy), &mut s.dcol, dx);
    }
    if want_db {
        for (b, plane) in s.db[..cout]
            .iter_mut()
            .zip(s.db_planes.chunks_exact(p.max(1)))
        {
            *b = cpu::sum(plane);
        }
    }
}

/// The input gradient of a part's images into `dx`, image by image and a
/// block of input channels at a time: the block's column gradient
/// `W_block^T dy` (from `weight_t`, the weights transposed), then col2im
/// of those channels. A block's column gradient stays in L1 between the
/// product that writes it and the col2im that reads it back (a round's,
/// 512 KB for LeNet's conv2, was read back from L2 at 6 cycles a load).
fn input_gradient<T: MathElement>(
    g: &ConvGeometry,
    block: usize,
    (weight_t, dy): (&[T], &[T]),
    dcol: &mut [T],
    dx: &mut [T],
) {
    let (cout, p, cin) = (g.channels_out, g.oh * g.ow, g.channels_in);
    let (taps, plane) = (g.kernel[0] * g.kernel[1], g.h * g.w);
    let images = dy
        .chunks_exact((cout * p).max(1))
        .zip(dx.chunks_exact_mut((cin * plane).max(1)));
    for (dy, dx) in images {
        for c0 in (0..cin).step_by(block) {
            let channels = block.min(cin - c0);
            let rows = channels * taps;
            let dcol = &mut dcol[..rows * p];
            cpu::gemm(
                Transpose::No,
                Transpose::No,
                rows,
                p,
                cout,
                T::ONE,
                &weight_t[c0 * taps * cout..][..rows * cout],
                dy,
                T::ZERO,
                dcol,
            );
            let sub = ConvGeometry {
                batch: 1,
                channels_in: channels,
                ..*g
            };
            sub.col2im_set(dcol, 1, &mut dx[c0 * plane..][..channels * plane]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut v = vec![0.0f32; n];
        cpu::set_seed(seed);
        cpu::gaussian(0.0, 1.0, &mut v).unwrap();
        v
    }

    #[test]
    fn strided_runs_take_every_step_th_value_to_the_last() {
        let x: Vec<f32> = (0..40).map(|v| v as f32).collect();
        for step in [2, 3, 5] {
            for (from, len) in [(0, 1), (1, 7), (3, 12), (40 - 1 - 6 * step, 7)] {
                if from + (len - 1) * step >= x.len() {
                    continue;
                }
                let mut col = vec![f32::NAN; len + 2];
                copy_every(&mut col, 1, &x, (from, step), len);
                let want: Vec<f32> = (0..len).map(|q| x[from + q * step]).collect();
                assert_eq!(
                    col[1..=len],
                    want[..],
                    "step {step}, from {from}, {len} values"
                );
                assert!(
                    col[0].is_nan() && col[len + 1].is_nan(),
                    "nothing written around the run"
                );
            }
        }
    }

    #[test]
    fn products_from_the_image_give_im2cols_bits() {
        // LeNet's conv2, a depth of 576 (two of the kernel's depth
        // blocks), rows of 6 outputs that straddle the 32-column panels
        // with a 3 x 2 window, and a partial last image's panel.
        for (cin, (h, w), [kh, kw], cout, images) in [
            (20, (12, 12), [5, 5], 50, 4),
            (64, (8, 7), [3, 3], 20, 2),
            (3, (9, 7), [3, 2], 13, 3),
            (40, (6, 5), [3, 3], 9, 5),
        ] {
            let g = ConvGeometry {
                batch: images,
                channels_in: cin,
                channels_out: cout,
                h,
                w,
                oh: h - kh + 1,
                ow: w - kw + 1,
                kernel: [kh, kw],
                stride: [1, 1],
                pad: [0, 0],
                dilation: [1, 1],
            };
            let x = values(images * cin * h * w, 1);
            let weight = values(cout * g.patch(), 2);
            let cols = images * g.oh * g.ow;
            let mut col = vec![0.0; g.patch() * cols];
            g.im2col(&x, 0, images, &mut col);
            let mut want = vec![f32::NAN; cout * cols];
            let (m, k) = (cout, g.patch());
            cpu::gemm(
                Transpose::No,
                Transpose::No,
                m,
                cols,
                k,
                1.0,
                &weight,
                &col,
                0.0,
                &mut want,
            );
            let mut got = vec![f32::NAN; cout * cols];
            let ran = g.product_from_image(&x, 0, images, &weight, &mut got);
            assert_eq!(ran, cpu::isa() >= cpu::Isa::Avx2, "{g:?}");
            if ran {
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{g:?}");
            }
        }
    }

    #[test]
    fn small_outputs_taken_as_dots_match_the_definition() {
        // MobileNet-SSD's last three 3 x 3 stride-2 layers (onto 1 x 1,
        // 2 x 2 and 3 x 3), a dilated window reaching past every edge,
        // a rectangular one onto a row of 9, a batch of 3 on two cores;
        // then outputs of 10 pixels and a 1 x 1 classifier window, which
        // take other routes.
        use super::super::test_support::geometry;
        let one = [1, 1];
        for (window, dots) in [
            ((64, (2, 2), [3, 3], 128, 1, [2, 2], one, one), true),
            ((128, (3, 3), [3, 3], 40, 2, [2, 2], one, one), true),
            ((128, (5, 5), [3, 3], 37, 1, [2, 2], one, one), true),
            ((30, (3, 3), [3, 3], 20, 3, one, [2, 2], [2, 2]), true),
            ((20, (1, 9), [3, 5], 16, 2, one, [1, 2], one), true),
            ((32, (2, 5), [3, 3], 16, 1, one, one, one), false),
            ((40, (3, 3), [3, 3], 16, 2, one, [0, 0], one), false),
        ] {
            let g = geometry(window);
            let runs_here = cpu::isa() >= cpu::Isa::Avx2;
            assert_eq!(g.takes_pixel_dots::<f32>(), dots && runs_here, "{g:?}");
            let (cout, p, k) = (g.channels_out, g.oh * g.ow, g.patch());
            let x = values(g.batch * g.channels_in * g.h * g.w, 1);
            let (w, b) = (values(cout * k, 2), values(cout, 3));
            let finish = Finish {
                bias: &b,
                activation: Some(Activation::Relu),
            };
            let mut col = vec![0.0; k * p];
            let mut want = Vec::new();
            for image in 0..g.batch {
                g.im2col(&x, image, 1, &mut col);
                for (o, weights) in w.chunks_exact(k).enumerate() {
                    for pixel in 0..p {
                        let dot: f64 = (0..k)
                            .map(|i| f64::from(weights[i]) * f64::from(col[i * p + pixel]))
                            .sum();
                        want.push((dot + f64::from(b[o])).max(0.0));
                    }
                }
            }
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .unwrap();
            let mut got = vec![f32::NAN; g.batch * cout * p];
            pool.install(|| {
                let mut scratch = ConvScratch::default();
                let y = (&mut got[..], cout * p);
                forward(&g, &mut scratch, &x, (&w, None), finish, y).unwrap();
            });
            for (i, (&got, &want)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (f64::from(got) - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "{g:?}: output {i} is {got}, want {want}"
                );
            }
        }
    }

    #[test]
    fn images_written_at_a_stride_keep_their_bits() {
        // A Concat's top folded into the Convolutions before it: each
        // image's output a run of a larger image, the values between left
        // as they were. A 1x1 layer, a 3x3 one, rounds of small images, a
        // strided first layer, with and without packed weights, on one
        // core and shared among two.
        use super::super::packed_weights::PackedWeights;
        use super::super::test_support::geometry;
        let one = [1, 1];
        for window in [
            (32, (14, 14), one, 48, 3, one, [0, 0], one),
            (16, (20, 20), [3, 3], 32, 3, one, one, one),
            (8, (6, 6), [5, 5], 12, 5, one, [2, 2], one),
            (3, (23, 23), [3, 3], 16, 3, [2, 2], [0, 0], one),
        ] {
            let g = geometry(window);
            let (cout, per_image) = (g.channels_out, g.channels_out * g.oh * g.ow);
            let x = values(g.batch * g.channels_in * g.h * g.w, 1);
            let (w, b) = (values(cout * g.patch(), 2), values(cout, 3));
            let finish = Finish {
                bias: &b,
                activation: Some(Activation::Relu),
            };
            let mut packs = PackedWeights::default();
            let packed = packs.for_layer(&g, 1, &w).unwrap().map(<[f32]>::to_vec);
            let (lead, stride) = (5, per_image + 11);
            for packed in [packed.as_deref(), None] {
                for cores in [1, 2] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(cores)
                        .build()
                        .unwrap();
                    let (want, got) = pool.install(|| {
                        let mut scratch = ConvScratch::default();
                        let mut want = vec![f32::NAN; g.batch * per_image];
                        let y = (&mut want[..], per_image);
                        forward(&g, &mut scratch, &x, (&w, packed), finish, y).unwrap();
                        let mut got = vec![f32::NAN; lead + g.batch * stride];
                        let y = (&mut got[lead..], stride);
                        forward(&g, &mut scratch, &x, (&w, packed), finish, y).unwrap();
                        (want, got)
                    });
                    let what = format!("{g:?}, packed {}, {cores} cores", packed.is_some());
                    for (n, image) in want.chunks_exact(per_image).enumerate() {
                        let at = lead + n * stride;
                        let run = &got[at..][..per_image];
                        assert!(
                            run.iter()
                                .zip(image)
                                .all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{what}: image {n}"
                        );
                        let gap = &got[at + per_image..(at + stride).min(got.len())];
                        assert!(gap.iter().all(|v| v.is_nan()), "{what}: after image {n}");
                    }
                    assert!(got[..lead].iter().all(|v| v.is_nan()), "{what}: before");
                }
            }
        }
    }
}
