//! Convolutions on the CPU without im2col: a net's first layer
//! (LeNet's conv1, 1 x 5 x 5; MTCNN's, 3 x 3 x 3; SqueezeNet's and
//! MobileNet's 3 x 3 x 3 at stride 2) and the layers at stride 1 up to
//! LeNet's conv2 (20 x 5 x 5), read by `cpu::correlate` from copies of
//! the image: one per kernel column (and, at a stride, per phase of the
//! padded rows the window's rows fall on), each shifted by its column,
//! taking every `stride`-th value, and cut to the output's width, with
//! its padding. Output `(r, q)` then reads tap `(c, i, j)` at a fixed
//! offset from `r * ow + q` in those copies. Its sums are the im2col +
//! gemm path's, bit for bit, up to a patch of 256 (the gemm's depth
//! block; a deeper patch is one chain of multiply-adds here, two blocks
//! there) where the product has more than one row and column (one is a
//! gemv's); a shallow layer's weight gradient
//! (`cpu::correlate_gradient`) reads the same copies. im2col would copy
//! the image once per tap, 25 times for LeNet's conv1, and that copy
//! cost as much as the product.

use std::any::TypeId;
use std::ops::Range;

use blob_kernels::cpu;
use blob_runtime::MathElement;

use crate::f32_view::{as_f32, as_f32_mut};

use super::cpu::{ConvGeometry, Finish, rectifier_of};

/// The deepest patch whose forward pass is taken directly: LeNet's conv2
/// (500 deep) ran 2.27-2.31 -> 2.15-2.16 ms a batch of 64 taken so
/// rather than by gemm on panels filled from the image, MTCNN's P-Net
/// conv2 on a 60 x 80 image 0.045-0.049 -> 0.033 ms; SqueezeNet's and
/// GoogLeNet's layers below it ran as fast either way. Deeper layers
/// (ResNet's and VGG's 3x3 of 64 channels and more) keep the gemm,
/// unmeasured this way.
const DIRECT_PATCH_MAX: usize = 512;

/// The fewest outputs a plane for which a patch deeper than
/// [`SHALLOW_PATCH_MAX`] is taken directly: a step computes 32 outputs,
/// and on planes of 9 and 1 (P-Net's conv2 and conv3 on its 12 x 12
/// input, R-Net's conv3) the direct pass ran 10-20% slower than gemm.
const DIRECT_PLANE_MIN: usize = 16;

/// The deepest patch taken directly at a stride other than 1: a net's
/// first layer. One layer alone, batch 1, against phase copies and the
/// gemm (2026-11-28, Zen 5): SqueezeNet's 3 x 3 x 3 at stride 2 0.283 ->
/// 0.244 ms on one thread (AVX2 0.517 -> 0.484, two threads 0.187 ->
/// 0.145; in the net 0.51 -> 0.36, its output written once); GoogLeNet's
/// and ResNet's 7 x 7 x 3 at 2 (147) 1.175 -> 1.12 ms, two threads 0.99
/// -> 0.71; CaffeNet's 11 x 11 x 3 at 4 (363, four row phases) 1.05 ->
/// 1.17 ms, left to the gemm.
const STRIDED_PATCH_MAX: usize = 160;

/// The deepest patch taken directly on planes of any size, whose weight
/// gradient is taken from the shifted copies too (a net's first layer):
/// LeNet's conv2 (500 deep) ran its gradient at 83-89 GFLOP/s that way,
/// no faster than im2col and gemm; conv1's (25) at 112.
const SHALLOW_PATCH_MAX: usize = 32;

/// The most values of shifted copies a weight-gradient round makes
/// (LeNet's conv1: 39 images): enough images that adding each
/// gradient's 16 lanes once a round costs little, few enough to stay in
/// the core's cache.
const DIRECT_ROUND_MAX: usize = 1 << 17;

/// One image laid out as its shifted copies, and where each tap reads
/// in them.
#[derive(Clone, Debug)]
pub(super) struct Direct {
    /// Values of one image's copies.
    per_image: usize,
    /// Each tap's offset, in im2col's order (channel, row, column).
    offsets: Vec<usize>,
    /// Rows of a copy.
    rows: usize,
    /// The padded rows' phases the taps read, `i * dilation % stride`
    /// for the window's rows `i`: one copy of each kernel column for
    /// each (at stride 1, one).
    phases: Vec<usize>,
}

const F32: &str = "ConvGeometry::direct found f32";

impl ConvGeometry {
    /// Whether this convolution's forward pass is taken directly, and
    /// the layout of its shifted copies: `f32` on an AVX-512 or AVX2 machine,
    /// stride 1 (or any stride for a patch of at most
    /// [`STRIDED_PATCH_MAX`]), a patch of at most [`DIRECT_PATCH_MAX`] (beyond
    /// [`SHALLOW_PATCH_MAX`], on planes of [`DIRECT_PLANE_MIN`] outputs
    /// or more), and not a 1x1 layer (whose input is its own column
    /// buffer).
    pub(super) fn direct<T: 'static>(&self) -> Option<Direct> {
        let suited = TypeId::of::<T>() == TypeId::of::<f32>()
            && cpu::isa() >= cpu::Isa::Avx2
            && (self.stride == [1, 1] || self.patch() <= STRIDED_PATCH_MAX)
            && !self.is_pointwise()
            // No input channel: no tap to read, the output is the bias
            // (the correlation kernel needs at least one tap).
            && self.patch() > 0
            && self.patch() <= DIRECT_PATCH_MAX
            && (self.patch() <= SHALLOW_PATCH_MAX || self.oh * self.ow >= DIRECT_PLANE_MIN)
            && self.oh > 0
            && self.ow > 0;
        suited.then(|| self.direct_rows(self.oh))
    }

    /// The layout of the shifted copies that `out_rows` rows of the
    /// output read (all `oh` of them for a whole image, a band of them
    /// for one core's share of it).
    fn direct_rows(&self, out_rows: usize) -> Direct {
        let [kh, kw] = self.kernel;
        let ([sh, _], [dh, _]) = (self.stride, self.dilation);
        let mut phases: Vec<usize> = (0..kh).map(|i| i * dh % sh).collect();
        phases.sort_unstable();
        phases.dedup();
        // Copy (c, j, phase) row R holds padded row R * sh + phase, so tap
        // (c, i, j) reads output row r from row r + i * dh / sh of the
        // copy of its phase.
        let rows = out_rows + (kh - 1) * dh / sh;
        let copy = rows * self.ow;
        let mut offsets = Vec::with_capacity(self.patch());
        for c in 0..self.channels_in {
            for i in 0..kh {
                let phase = phases.binary_search(&(i * dh % sh)).unwrap_or(0);
                for j in 0..kw {
                    let at = (c * kw + j) * phases.len() + phase;
                    offsets.push(at * copy + i * dh / sh * self.ow);
                }
            }
        }
        Direct {
            per_image: self.channels_in * kw * phases.len() * copy,
            offsets,
            rows,
            phases,
        }
    }

    /// The output rows that [`forward_rows`] takes at a time: as many
    /// as keep their shifted copies within [`BAND_COPIES_BYTES`], at
    /// least [`BAND_ROWS_MIN`].
    fn band_rows(&self) -> usize {
        let one = self.direct_rows(1);
        let per_row = one.per_image / one.rows.max(1);
        let extra = one.rows - 1;
        (BAND_COPIES_BYTES / std::mem::size_of::<f32>() / per_row.max(1))
            .saturating_sub(extra)
            .max(BAND_ROWS_MIN)
    }

    /// Whether the weight gradient is taken from the shifted copies too:
    /// a patch of at most [`SHALLOW_PATCH_MAX`].
    pub(super) fn direct_gradient<T: 'static>(&self) -> Option<Direct> {
        self.direct::<T>()
            .filter(|_| self.patch() <= SHALLOW_PATCH_MAX)
    }

    /// Writes the image `x` (`channels_in` planes of `h x w`) as its
    /// shifted copies into `out` (`direct`'s layout) for the output rows
    /// from `first_row` on: copy `(c, j, phase)` row `R` holds padded row
    /// `(first_row + R) * stride + phase`'s values at columns `q * stride
    /// + j * dilation` for `q < ow`, padding as zero.
    fn shift_image(&self, direct: &Direct, x: &[f32], first_row: usize, out: &mut [f32]) {
        let Self {
            h,
            w,
            ow,
            kernel: [_, kw],
            stride: [sh, sw],
            pad: [ph, pw],
            dilation: [_, dw],
            ..
        } = *self;
        let copies = out.chunks_exact_mut(direct.rows * ow);
        let channel_columns = (0..self.channels_in)
            .flat_map(|c| (0..kw).flat_map(move |j| direct.phases.iter().map(move |&p| (c, j, p))));
        for (copy, (c, j, phase)) in copies.zip(channel_columns) {
            // Output column q reads input column q * sw + j * dw - pw:
            // columns lo..hi of the copy's rows read the image.
            let shift = j * dw;
            let lo = pw.saturating_sub(shift).div_ceil(sw).min(ow);
            let hi = (w + pw).saturating_sub(shift).div_ceil(sw).clamp(lo, ow);
            // Rows top..bottom of the copy read the image's rows.
            let top = (ph.saturating_sub(phase))
                .div_ceil(sh)
                .saturating_sub(first_row)
                .min(direct.rows);
            let bottom = (h + ph)
                .saturating_sub(phase)
                .div_ceil(sh)
                .saturating_sub(first_row)
                .clamp(top, direct.rows);
            let (above, image) = copy.split_at_mut(top * ow);
            let (image, below) = image.split_at_mut((bottom - top) * ow);
            above.fill(0.0);
            below.fill(0.0);
            if hi > lo && bottom > top {
                let image_row = (first_row + top) * sh + phase - ph;
                let from = (c * h + image_row) * w + lo * sw + shift - pw;
                if sw == 1 && sh == 1 {
                    cpu::copy_rows(&x[from..], w, &mut image[lo..], ow, [bottom - top, hi - lo]);
                } else {
                    cpu::copy_strided_rows(
                        &x[from..],
                        sh * w,
                        sw,
                        &mut image[lo..],
                        ow,
                        [bottom - top, hi - lo],
                    );
                }
            }
            if lo > 0 || hi < ow {
                for row in image.chunks_exact_mut(ow) {
                    row[..lo].fill(0.0);
                    row[hi..].fill(0.0);
                }
            }
        }
    }
}

/// The bytes of shifted copies [`forward_rows`] makes before it reads
/// them: a band's copies stay in L2 (half of a Zen 3 core's) while its
/// channels read them. A whole image's copies (MobileNet-SSD's conv0: 18
/// copies of 151 x 150, 1.6 MB) were written out to L3 and read back
/// from it. In the nets, one Zen 5 core, AVX-512, medians of 3-5
/// alternating runs (2026-12-05), ms: MobileNet-SSD's conv0 0.41 ->
/// 0.30 (the pass 12.10 -> 11.60; two threads 0.23 -> 0.19; AVX2 0.54
/// -> 0.52), SqueezeNet's conv1 0.33 -> 0.29, GoogLeNet's and ResNet-50's
/// 7 x 7 conv1 1.31 -> 1.10 and 1.27 -> 1.10. Bands of 128 and 512 KiB
/// ran within the noise of 256.
const BAND_COPIES_BYTES: usize = 256 << 10;

/// The fewest output rows of a band: a wide image's band still makes
/// few enough copies of the rows its window overlaps with the next
/// band's.
const BAND_ROWS_MIN: usize = 4;

impl Direct {
    /// Images a weight-gradient round takes, of a part of `count`.
    pub(super) fn images_per_round(&self, count: usize) -> usize {
        (DIRECT_ROUND_MAX / self.per_image.max(1)).clamp(1, count.max(1))
    }

    /// The scratch a direct pass over `images` images needs.
    pub(super) fn scratch_size(&self, images: usize) -> usize {
        self.per_image.saturating_mul(images)
    }
}

/// `y = conv(x) + bias` for images `first..first + count` of `x` into
/// `y` (those images' outputs, each `stride` values after the one
/// before), through `scratch` (at least [`Direct::scratch_size`] of one
/// image): each image's output rows a band at a time ([`forward_rows`]).
/// `T` is `f32`, as [`ConvGeometry::direct`] found.
pub(super) fn forward<T: MathElement>(
    g: &ConvGeometry,
    (x, weight, finish): (&[T], &[T], Finish<'_, T>),
    (first, count): (usize, usize),
    (y, stride): (&mut [T], usize),
    scratch: &mut [T],
) {
    let (image_in, plane_out) = (g.channels_in * g.h * g.w, g.oh * g.ow);
    for img in 0..count {
        let image = &x[(first + img) * image_in..][..image_in];
        let yi = &mut y[img * stride..][..g.channels_out * plane_out];
        let mut planes: Vec<&mut [T]> = yi.chunks_exact_mut(plane_out.max(1)).collect();
        forward_rows(g, (image, weight, finish), 0..g.oh, &mut planes, scratch);
    }
}

/// One image's `y = conv(x) + bias` for its output rows `rows`, into
/// `runs` (each output channel's run of those rows), through `scratch`
/// (at least [`Direct::scratch_size`] of one image): the whole image, or
/// one core's share of an image whose rows the cores cut. The rows are
/// taken a band at a time ([`ConvGeometry::band_rows`]), each band's
/// shifted copies made just before they are read. `T` is `f32`, as
/// [`ConvGeometry::direct`] found.
pub(super) fn forward_rows<T: MathElement>(
    g: &ConvGeometry,
    (x, weight, finish): (&[T], &[T], Finish<'_, T>),
    rows: Range<usize>,
    runs: &mut [&mut [T]],
    scratch: &mut [T],
) {
    let band = g.band_rows();
    for start in rows.clone().step_by(band) {
        let end = rows.end.min(start + band);
        let cut = (start - rows.start) * g.ow..(end - rows.start) * g.ow;
        let mut band_runs: Vec<&mut [T]> =
            runs.iter_mut().map(|run| &mut run[cut.clone()]).collect();
        let layout = g.direct_rows(end - start);
        correlate_rows(
            g,
            &layout,
            (x, weight, finish),
            start,
            &mut band_runs,
            scratch,
        );
    }
}

/// [`forward_rows`] of the `direct.rows` output rows' band from
/// `first_row`, laid out as `direct`.
fn correlate_rows<T: MathElement>(
    g: &ConvGeometry,
    direct: &Direct,
    (x, weight, finish): (&[T], &[T], Finish<'_, T>),
    first_row: usize,
    runs: &mut [&mut [T]],
    scratch: &mut [T],
) {
    let (x, weight, bias) = (
        as_f32(x).expect(F32),
        as_f32(weight).expect(F32),
        as_f32(finish.bias).expect(F32),
    );
    let scratch = as_f32_mut(scratch).expect(F32);
    let mut runs: Vec<&mut [f32]> = runs
        .iter_mut()
        .map(|run| as_f32_mut(run).expect(F32))
        .collect();
    let copies = &mut scratch[..direct.per_image];
    let out_rows = direct.rows - (g.kernel[0] - 1) * g.dilation[0] / g.stride[0];
    let taps = cpu::Taps {
        offsets: &direct.offsets,
        len: out_rows * g.ow,
    };
    // The rectifier is applied as each value is stored; a leaky ReLU
    // keeps its own pass.
    let (rectifier, after) = match rectifier_of(finish.activation) {
        Some(rectifier) => (rectifier, None),
        None => (cpu::Rectifier::None, finish.activation),
    };
    g.shift_image(direct, x, first_row, copies);
    let ran = cpu::correlate(copies, taps, weight, bias, rectifier, &mut runs);
    debug_assert!(ran, "ConvGeometry::direct found AVX-512 or AVX2");
    let after = Finish::<f32> {
        bias: &[],
        activation: after,
    };
    for run in runs {
        after.activate(&mut run[..taps.len]);
    }
}

/// The shifted copies of images `first..first + count` of `x`, one after
/// another at the front of `scratch`.
fn shift_images<'s>(
    g: &ConvGeometry,
    direct: &Direct,
    x: &[f32],
    (first, count): (usize, usize),
    scratch: &'s mut [f32],
) -> &'s mut [f32] {
    let image_in = g.channels_in * g.h * g.w;
    let copies = &mut scratch[..direct.per_image * count];
    for (img, out) in copies.chunks_exact_mut(direct.per_image).enumerate() {
        g.shift_image(direct, &x[(first + img) * image_in..][..image_in], 0, out);
    }
    copies
}

/// `dw += ` the weight gradient of images `first..first + count`, whose
/// output gradients are `dy` (theirs alone), through `scratch` (at least
/// [`Direct::scratch_size`] of `count` images). `T` is `f32`, as
/// [`ConvGeometry::direct_gradient`] found.
pub(super) fn weight_gradient<T: MathElement>(
    g: &ConvGeometry,
    direct: &Direct,
    (x, dy): (&[T], &[T]),
    (first, count): (usize, usize),
    dw: &mut [T],
    scratch: &mut [T],
) {
    let (x, dy) = (as_f32(x).expect(F32), as_f32(dy).expect(F32));
    let (dw, scratch) = (as_f32_mut(dw).expect(F32), as_f32_mut(scratch).expect(F32));
    let copies = shift_images(g, direct, x, (first, count), scratch);
    let taps = cpu::Taps {
        offsets: &direct.offsets,
        len: g.oh * g.ow,
    };
    let ran = cpu::correlate_gradient(copies, direct.per_image, taps, dy, g.channels_out, dw);
    debug_assert!(ran, "ConvGeometry::direct found AVX-512 or AVX2");
}

/// `dw += dy_t x im2col^T` for images `first..first + count` of a patch
/// deeper than [`ConvGeometry::direct_gradient`] takes (Caffe's
/// `weight_cpu_gemm`), `dy_t` their output gradients as `(cout, image,
/// p)`: the gemm asks for im2col's rows a panel at a time, and each is
/// read where it lies, a run of an image's shifted copy (im2col row
/// `(c, ki, kj)` of an image is its copy for `(c, kj)` from row `ki`
/// on), so the column buffer is neither written nor packed. `scratch`
/// holds [`Direct::scratch_size`] of `count` images. `T` is `f32`, and
/// `cpu::gemm_filled_suits` took the shape.
pub(super) fn weight_gradient_product<T: MathElement>(
    g: &ConvGeometry,
    direct: &Direct,
    (x, dy_t): (&[T], &[T]),
    (first, count): (usize, usize),
    dw: &mut [T],
    scratch: &mut [T],
) {
    let (x, dy_t) = (as_f32(x).expect(F32), as_f32(dy_t).expect(F32));
    let (dw, scratch) = (as_f32_mut(dw).expect(F32), as_f32_mut(scratch).expect(F32));
    let copies = &*shift_images(g, direct, x, (first, count), scratch);
    let plane = g.oh * g.ow;
    let fill = |rows: Range<usize>, taps: Range<usize>, panel: &mut [f32]| {
        // Panel row r is output position rows.start + r of the round: a
        // run of positions within one image reads each tap's copy once.
        let mut at = rows.start;
        while at < rows.end {
            let (img, q) = (at / plane, at % plane);
            let len = (plane - q).min(rows.end - at);
            let image = &copies[img * direct.per_image..][..direct.per_image];
            let columns: [&[f32]; cpu::PANEL_COLUMNS] = std::array::from_fn(|j| {
                let tap = direct.offsets[(taps.start + j).min(taps.end - 1)];
                &image[tap + q..][..len]
            });
            let panel_rows = &mut panel[(at - rows.start) * cpu::PANEL_COLUMNS..];
            cpu::panel_from_columns(&columns[..taps.len()], len, panel_rows);
            at += len;
        }
    };
    let (cout, patch) = (g.channels_out, g.patch());
    let ran = cpu::gemm_filled(cout, patch, count * plane, dy_t, fill, 1.0, dw);
    debug_assert!(
        ran,
        "an AVX-512 or AVX2 machine, as cpu::gemm_filled_suits found"
    );
}

#[cfg(test)]
mod tests {
    use blob_kernels::cpu::Transpose;

    use super::super::test_support::{geometry, values};
    use super::*;
    use crate::folded_activation::Activation;

    #[test]
    fn strided_copies_give_im2cols_sums_and_gradients() {
        // SqueezeNet's and MobileNet's first layer (3 x 3 at 2, padded
        // or not), strides 3 and 4 with whole rows and columns of
        // padding, dilation whose rows fall on one phase or two,
        // rectangular strides, and stride 1 (the layout it had).
        for window in [
            (3, (31, 31), [3, 3], 16, 2, [2, 2], [0, 0], [1, 1]),
            (3, (20, 23), [3, 3], 32, 1, [2, 2], [1, 1], [1, 1]),
            (2, (17, 19), [4, 4], 9, 2, [3, 4], [3, 2], [1, 1]),
            (1, (21, 18), [3, 3], 8, 1, [2, 2], [2, 2], [2, 2]),
            (2, (19, 16), [3, 2], 12, 2, [3, 1], [1, 0], [2, 3]),
            (3, (12, 13), [3, 3], 10, 2, [1, 1], [1, 1], [1, 1]),
            // Images whose copies outgrow a band: MobileNet's first
            // layer on 200 x 200 (three bands of 35 rows, each making
            // one more row of copies than it has outputs), and a 5 x 5
            // window at stride 1 (bands of 24 rows, overlapping by 4).
            (3, (200, 200), [3, 3], 16, 1, [2, 2], [1, 1], [1, 1]),
            (4, (120, 120), [5, 5], 8, 1, [1, 1], [0, 0], [1, 1]),
        ] {
            let g = geometry(window);
            if g.oh > 50 {
                assert!(g.band_rows() < g.oh / 2, "{g:?} in bands");
            }
            let Some(direct) = g.direct::<f32>() else {
                assert_eq!(cpu::isa(), cpu::Isa::Baseline, "{g:?}");
                continue;
            };
            let (cin, (h, w), cout, images) = (window.0, window.1, window.3, window.4);
            let (x, weight, bias) = (
                values(images * cin * h * w, 1),
                values(cout * g.patch(), 2),
                values(cout, 3),
            );
            let (k, p) = (g.patch(), g.oh * g.ow);
            let mut scratch = vec![f32::NAN; direct.scratch_size(images)];
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let mut dw_want = vec![0.0f32; cout * k];
            let mut dy = Vec::new();
            for img in 0..images {
                // Caffe's im2col, gemm and bias for this image.
                let mut col = vec![0.0; k * p];
                g.im2col(&x, img, 1, &mut col);
                let mut want = vec![f32::NAN; cout * p];
                let (a, b) = (Transpose::No, Transpose::No);
                cpu::gemm(a, b, cout, p, k, 1.0, &weight, &col, 0.0, &mut want);
                for (plane, b) in want.chunks_exact_mut(p).zip(&bias) {
                    plane.iter_mut().for_each(|v| *v += b);
                }
                // None, and each activation a net folds in, as its own
                // layer would apply it after (the rectifiers in the
                // stores, the leaky ReLU in a pass).
                for activation in [
                    None,
                    Some(Activation::Relu),
                    Some(Activation::Relu6),
                    Some(Activation::LeakyRelu {
                        negative_slope: 0.1,
                    }),
                ] {
                    let mut got = vec![f32::NAN; cout * p];
                    let finish = Finish {
                        bias: &bias,
                        activation,
                    };
                    forward(
                        &g,
                        (&x, &weight, finish),
                        (img, 1),
                        (&mut got, cout * p),
                        &mut scratch,
                    );
                    let activated: Vec<f32> = match activation {
                        Some(act) => want.iter().map(|&v| act.apply(v)).collect(),
                        None => want.clone(),
                    };
                    let at = (img, activation);
                    assert_eq!(
                        bits(&got),
                        bits(&activated),
                        "{g:?}, image and activation {at:?}"
                    );
                }
                // The weight gradient of dy = y (without activation, the
                // bits forward gave), as Caffe's weight_cpu_gemm sums it:
                // dw += dy col^T.
                let (a, b) = (Transpose::No, Transpose::Yes);
                cpu::gemm(a, b, cout, k, p, 1.0, &want, &col, 1.0, &mut dw_want);
                dy.extend(want);
            }
            let mut dw = vec![0.0f32; cout * k];
            weight_gradient(&g, &direct, (&x, &dy), (0, images), &mut dw, &mut scratch);
            for (i, (&got, &want)) in dw.iter().zip(&dw_want).enumerate() {
                assert!(
                    (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                    "{g:?}: weight gradient {i}: {got} vs {want}"
                );
            }
        }
    }
}
