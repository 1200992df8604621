//! Convolutions at stride 1 on the CPU without im2col: a net's first
//! layer (LeNet's conv1, 1 x 5 x 5; MTCNN's, 3 x 3 x 3) and the layers
//! up to LeNet's conv2 (20 x 5 x 5), read by `cpu::correlate` from one
//! copy of the image per kernel column, each shifted by its column and
//! cut to the output's width, with its padding. Output `(r, q)` then
//! reads tap `(c, i, j)` at a fixed offset from `r * ow + q` in those
//! copies. Its sums are the im2col + gemm path's, bit for bit, up to a
//! patch of 256 (the gemm's depth block; a deeper patch is one chain of
//! multiply-adds here, two blocks there) where the product has more
//! than one row and column (one is a gemv's); a shallow layer's weight
//! gradient (`cpu::correlate_gradient`) reads the same copies. im2col would copy the image once per tap, 25 times for
//! LeNet's conv1, and that copy cost as much as the product.

use std::any::TypeId;
use std::ops::Range;

use blob_kernels::cpu;
use blob_runtime::MathElement;

use crate::f32_view::{as_f32, as_f32_mut};

use super::cpu::{ConvGeometry, Finish};

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
}

const F32: &str = "ConvGeometry::direct found f32";

impl ConvGeometry {
    /// Whether this convolution's forward pass is taken directly, and
    /// the layout of its shifted copies: `f32` on an AVX-512 or AVX2 machine,
    /// stride 1, a patch of at most [`DIRECT_PATCH_MAX`] (beyond
    /// [`SHALLOW_PATCH_MAX`], on planes of [`DIRECT_PLANE_MIN`] outputs
    /// or more), and not a 1x1 layer (whose input is its own column
    /// buffer).
    pub(super) fn direct<T: 'static>(&self) -> Option<Direct> {
        let suited = TypeId::of::<T>() == TypeId::of::<f32>()
            && cpu::isa() >= cpu::Isa::Avx2
            && self.stride == [1, 1]
            && !self.is_pointwise()
            // No input channel: no tap to read, the output is the bias
            // (the correlation kernel needs at least one tap).
            && self.patch() > 0
            && self.patch() <= DIRECT_PATCH_MAX
            && (self.patch() <= SHALLOW_PATCH_MAX || self.oh * self.ow >= DIRECT_PLANE_MIN)
            && self.oh > 0
            && self.ow > 0;
        if !suited {
            return None;
        }
        let rows = self.h + 2 * self.pad[0];
        let [kh, kw] = self.kernel;
        let [dh, _] = self.dilation;
        // Copy (c, j) holds `rows` rows of `ow`; tap (c, i, j) starts
        // `i * dh` rows into it.
        let copy = rows * self.ow;
        let mut offsets = Vec::with_capacity(self.patch());
        for c in 0..self.channels_in {
            for i in 0..kh {
                for j in 0..kw {
                    offsets.push((c * kw + j) * copy + i * dh * self.ow);
                }
            }
        }
        Some(Direct {
            per_image: self.channels_in * kw * copy,
            offsets,
        })
    }

    /// Whether the weight gradient is taken from the shifted copies too:
    /// a patch of at most [`SHALLOW_PATCH_MAX`].
    pub(super) fn direct_gradient<T: 'static>(&self) -> Option<Direct> {
        self.direct::<T>()
            .filter(|_| self.patch() <= SHALLOW_PATCH_MAX)
    }

    /// Writes the image `x` (`channels_in` planes of `h x w`) as its
    /// shifted copies into `out` ([`Direct`]'s layout): copy `(c, j)`
    /// row `r` holds padded row `r`'s values `q + j * dilation` for
    /// `q < ow`, padding as zero.
    fn shift_image(&self, x: &[f32], out: &mut [f32]) {
        let Self {
            h,
            w,
            ow,
            kernel: [_, kw],
            pad: [ph, pw],
            dilation: [_, dw],
            ..
        } = *self;
        let rows = h + 2 * ph;
        let copies = out.chunks_exact_mut(rows * ow);
        let channel_columns = (0..self.channels_in).flat_map(|c| (0..kw).map(move |j| (c, j)));
        for (copy, (c, j)) in copies.zip(channel_columns) {
            // Output column q reads input column q + j * dw - pw: columns
            // lo..hi of each row of the image, padding around them.
            let shift = j * dw;
            let lo = pw.saturating_sub(shift).min(ow);
            let hi = (w + pw).saturating_sub(shift).clamp(lo, ow);
            let (above, image) = copy.split_at_mut(ph * ow);
            let (image, below) = image.split_at_mut(h * ow);
            above.fill(0.0);
            below.fill(0.0);
            if hi > lo {
                let from = c * h * w + lo + shift - pw;
                cpu::copy_rows(&x[from..], w, &mut image[lo..], ow, [h, hi - lo]);
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
/// `y` (those images' outputs), through `scratch` (at least
/// [`Direct::scratch_size`] of one image). `T` is `f32`, as
/// [`ConvGeometry::direct`] found.
pub(super) fn forward<T: MathElement>(
    g: &ConvGeometry,
    direct: &Direct,
    (x, weight, finish): (&[T], &[T], Finish<'_, T>),
    (first, count): (usize, usize),
    y: &mut [T],
    scratch: &mut [T],
) {
    let (x, weight, bias) = (
        as_f32(x).expect(F32),
        as_f32(weight).expect(F32),
        as_f32(finish.bias).expect(F32),
    );
    let (y, scratch) = (as_f32_mut(y).expect(F32), as_f32_mut(scratch).expect(F32));
    let copies = &mut scratch[..direct.per_image];
    let (image_in, plane_out) = (g.channels_in * g.h * g.w, g.oh * g.ow);
    let taps = cpu::Taps {
        offsets: &direct.offsets,
        len: plane_out,
    };
    for img in 0..count {
        g.shift_image(&x[(first + img) * image_in..][..image_in], copies);
        let yi = &mut y[img * g.channels_out * plane_out..][..g.channels_out * plane_out];
        let ran = cpu::correlate(copies, taps, weight, bias, g.channels_out, yi);
        debug_assert!(ran, "ConvGeometry::direct found AVX-512 or AVX2");
        // The image's output is still in cache.
        Finish {
            bias: &[],
            relu: finish.relu,
        }
        .rectify(yi);
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
        g.shift_image(&x[(first + img) * image_in..][..image_in], out);
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
