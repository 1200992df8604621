//! The CPU forward product of a convolution whose im2col is not its
//! input's plain runs (a stride, padding or dilation), without im2col:
//! a net's first layer (GoogLeNet's and ResNet's 7 x 7 at stride 2,
//! CaffeNet's 11 x 11 at 4, SqueezeNet's and MobileNet's 3 x 3 at 2) and
//! the padded layers Winograd does not take (GoogLeNet's 5 x 5 and its
//! 3 x 3 on 14 x 14 and 7 x 7, ResNet's and CaffeNet's 3 x 3 at batch 1,
//! SSD's heads). Their im2col, written to memory and packed again by
//! the product, took a fifth to a half of such a layer's time:
//! GoogLeNet's first layer writes 7 MB an image, a value at a time.
//!
//! Here each input channel is laid out as `stride` phase copies: copy
//! `(c, b)` row `R` holds the padded input row `R`'s values at columns
//! `Q * stride + b` (at stride 1, the padded input itself), so the tap
//! `(c, i, j)` whose column offset `j * dilation` is `a * stride + b`
//! reads output row `r` as a run of adjacent values of copy `(c, b)`,
//! row `r * stride + i * dilation`, from column `a`. The copies are about
//! the input's size (0.6 MB for GoogLeNet's first layer, which stays in
//! L2), and `cpu::gemm_filled` asks for im2col a panel at a time, each
//! panel row copied from them while the product waits on it in L1.

use std::any::TypeId;
use std::ops::Range;

use blob_kernels::cpu;
use blob_runtime::MathElement;

use super::cpu::{ConvGeometry, copy_run};
use crate::f32_view::{as_f32, as_f32_mut};

/// One image laid out as its phase copies, and where each tap reads in
/// them.
#[derive(Clone, Debug)]
pub(super) struct PhaseCopies {
    /// Values of a copy's row: the output's width and the widest column
    /// offset a tap adds.
    row_len: usize,
    /// Rows of a copy: the padded input's, or a band's.
    rows: usize,
    /// Values of one image's copies, or of one band's.
    per_image: usize,
    /// Each tap's offset, in im2col's order (channel, row, column).
    offsets: Vec<usize>,
    /// Output rows a band takes, where an image's copies are made a band
    /// of output rows at a time ([`BAND_VALUES`]).
    band: Option<usize>,
}

/// The most values of phase copies made at a time (1 MiB of f32, half
/// an Intel core's L2): an image whose copies are more is taken a band
/// of output rows at a time, each band's copies made just before its
/// product reads them, where the weights are few enough to be read once
/// a band. Made whole, YOLOv3's 3x3 stride-2 layers' copies (22 MB for
/// its 32 -> 64 at 416 x 416) were out of cache by the time the
/// product's panels read them, a tap's row from each of hundreds of
/// pages: that layer ran at 63 GFLOP/s on one Intel core, the same
/// layer on a 96 x 96 image (copies of 1.2 MB) at 102. In bands, in
/// YOLOv3 (one Intel core, medians of 3 alternating runs, ms): 32 -> 64
/// at 416 x 416 23.5 -> 17.9, 64 -> 128 at 208 x 208 15.4 -> 14.1; its
/// 512 -> 1024 at 26 x 26, whose 19 MB of weights two bands read twice,
/// 14.2 -> 16.3, so left whole.
const BAND_VALUES: usize = 1 << 18;

const F32: &str = "ConvGeometry::phase_copies found f32";

impl ConvGeometry {
    /// Whether this convolution's forward product is taken from phase
    /// copies: `f32` on an AVX-512 or AVX2 machine, a window of more than one tap
    /// whose im2col is not its input's plain runs (not
    /// [`ConvGeometry::is_dense`]). Measured against im2col and `gemm`,
    /// one layer alone at batch 1 (`docs/BENCHMARKS.md`, 2026-11-27):
    /// 1.02x-1.8x on one core, 1.2x-1.5x on two; level or up to 7% slower
    /// only for stride-2 windows onto 5 x 5 outputs or fewer (SSD's last
    /// extra layers).
    pub(super) fn takes_phase_copies<T: 'static>(&self) -> bool {
        TypeId::of::<T>() == TypeId::of::<f32>()
            && cpu::isa() >= cpu::Isa::Avx2
            && !self.is_dense()
            && self.kernel[0] * self.kernel[1] > 1
            // No input channel, no tap: the product is empty, im2col's.
            && self.channels_in > 0
            && self.oh > 0
            && self.ow > 0
    }

    /// The layout of this convolution's phase copies, where
    /// [`Self::takes_phase_copies`].
    pub(super) fn phase_copies<T: 'static>(&self) -> Option<PhaseCopies> {
        if !self.takes_phase_copies::<T>() {
            return None;
        }
        let ([kh, kw], [sh, sw], [dh, dw]) = (self.kernel, self.stride, self.dilation);
        let row_len = self.ow + (kw - 1) * dw / sw;
        let padded_rows = self.h + 2 * self.pad[0];
        // Copy rows a band of `r` output rows reads.
        let band_rows = |r: usize| (r - 1) * sh + (kh - 1) * dh + 1;
        let per_row = self.channels_in * sw * row_len;
        let whole = per_row * padded_rows;
        let band = (whole > BAND_VALUES)
            .then(|| {
                let fit = BAND_VALUES / per_row.max(1);
                (1..self.oh)
                    .rev()
                    .find(|&r| band_rows(r) <= fit)
                    .unwrap_or(1)
            })
            // Each band reads all the weights again: bands pay while those
            // reads are fewer values than the whole copies.
            .filter(|&r| {
                r < self.oh && self.channels_out * self.patch() * self.oh.div_ceil(r) <= whole
            });
        let rows = band.map_or(padded_rows, band_rows);
        let mut offsets = Vec::with_capacity(self.patch());
        for c in 0..self.channels_in {
            for i in 0..kh {
                for j in 0..kw {
                    let (a, b) = (j * dw / sw, j * dw % sw);
                    offsets.push(((c * sw + b) * rows + i * dh) * row_len + a);
                }
            }
        }
        Some(PhaseCopies {
            row_len,
            rows,
            per_image: self.channels_in * sw * rows * row_len,
            offsets,
            band,
        })
    }
}

impl PhaseCopies {
    /// The scratch the copies of `images` images need (of one band, where
    /// an image is taken in bands: one image at a time).
    pub(super) fn scratch_size(&self, images: usize) -> usize {
        match self.band {
            Some(_) => self.per_image,
            None => self.per_image.saturating_mul(images),
        }
    }

    /// Writes the image `x` (`channels_in` planes of `h x w`) as its
    /// phase copies into `out`, their rows from padded row `first` on:
    /// copy `(c, b)` row `R` column `Q` holds input row `first + R -
    /// pad`, column `Q * stride + b - pad`, or 0 where that is padding.
    fn write(&self, g: &ConvGeometry, x: &[f32], first: usize, out: &mut [f32]) {
        let (h, w, sw, [ph, pw]) = (g.h, g.w, g.stride[1], g.pad);
        let len = self.row_len;
        let copies = out.chunks_exact_mut(self.rows * len);
        let channel_phases = (0..g.channels_in).flat_map(|c| (0..sw).map(move |b| (c, b)));
        // Copy rows top..bottom read the image's rows.
        let top = ph.saturating_sub(first).min(self.rows);
        let bottom = (h + ph).saturating_sub(first).clamp(top, self.rows);
        for (copy, (c, b)) in copies.zip(channel_phases) {
            // Columns lo..hi of each row read the image.
            let lo = pw.saturating_sub(b).div_ceil(sw).min(len);
            let hi = (w + pw).saturating_sub(b).div_ceil(sw).clamp(lo, len);
            let (above, image) = copy.split_at_mut(top * len);
            let (image, below) = image.split_at_mut((bottom - top) * len);
            above.fill(0.0);
            below.fill(0.0);
            for row in image.chunks_exact_mut(len) {
                row[..lo].fill(0.0);
                row[hi..].fill(0.0);
            }
            if hi > lo && bottom > top {
                let from = (c * h + first + top - ph) * w + lo * sw + b - pw;
                cpu::copy_strided_rows(
                    &x[from..],
                    w,
                    sw,
                    &mut image[lo..],
                    len,
                    [bottom - top, hi - lo],
                );
            }
        }
    }
}

/// `out = weight x im2col(images first..first + count)` (`channels_out`
/// rows of `count * oh * ow`) for a window [`ConvGeometry::phase_copies`]
/// took, through `scratch` (at least [`PhaseCopies::scratch_size`] of
/// `count` images). The same sums as im2col and `gemm` wherever `gemm`
/// runs the kernel `gemm_filled` does.
pub(super) fn product<T: MathElement>(
    g: &ConvGeometry,
    copies: &PhaseCopies,
    (x, weight): (&[T], &[T]),
    (first, count): (usize, usize),
    out: &mut [T],
    scratch: &mut [T],
) {
    let (x, weight) = (as_f32(x).expect(F32), as_f32(weight).expect(F32));
    let (out, scratch) = (as_f32_mut(out).expect(F32), as_f32_mut(scratch).expect(F32));
    let image_in = g.channels_in * g.h * g.w;
    let (m, k, plane) = (g.channels_out, g.patch(), g.oh * g.ow);
    let row_step = g.stride[0] * copies.row_len;
    // The product of `images` images' copies (or of `rows` output rows of
    // one image, from output row `rows.start`), `made`, into `out`'s
    // columns from `at`.
    let mut run = |made: &[f32], (images, rows): (usize, Range<usize>), at: usize| {
        let fill = |taps: Range<usize>, cols: Range<usize>, panel: &mut [f32]| {
            let (runs, count) =
                g.panel_runs(cols, |img, r, q| img * copies.per_image + r * row_step + q);
            let rows = panel.chunks_exact_mut(cpu::PANEL_COLUMNS);
            for (&tap, row) in copies.offsets[taps].iter().zip(rows) {
                for &(to, from, len) in &runs[..count] {
                    copy_run(row, to, made, tap + from, len);
                }
            }
        };
        let n = images * rows.len() * g.ow;
        let ldc = count * plane;
        let ran = cpu::gemm_filled_into(m, n, k, weight, fill, 0.0, (&mut out[at..], ldc));
        debug_assert!(ran, "ConvGeometry::phase_copies found AVX-512 or AVX2");
    };
    let Some(band) = copies.band else {
        let made = &mut scratch[..copies.per_image * count];
        for (img, out) in made.chunks_exact_mut(copies.per_image).enumerate() {
            copies.write(g, &x[(first + img) * image_in..][..image_in], 0, out);
        }
        run(made, (count, 0..g.oh), 0);
        return;
    };
    // An image's copies a band at a time: each band's rows are a run of
    // output rows, its product a block of each channel's plane.
    let made = &mut scratch[..copies.per_image];
    for img in 0..count {
        let image = &x[(first + img) * image_in..][..image_in];
        for start in (0..g.oh).step_by(band) {
            let rows = start..g.oh.min(start + band);
            copies.write(g, image, start * g.stride[0], made);
            run(made, (1, rows), img * plane + start * g.ow);
        }
    }
}

#[cfg(test)]
mod tests {
    use blob_kernels::cpu::Transpose;

    use super::super::test_support::{geometry, values};
    use super::*;

    #[test]
    fn products_from_phase_copies_give_im2cols_sums() {
        // Strides 2, 4 and 3 (the vector picks and the plain loop),
        // padding on either axis (whole rows of it, runs that start or
        // end in it), dilation, column offsets past the output's width,
        // images whose panels straddle two images, padded and dilated
        // windows at stride 1; then GoogLeNet's first layer on a small
        // image, whose product `gemm` hands to another kernel (sums
        // within rounding there, the same bits elsewhere).
        for window in [
            (3, (15, 15), [3, 3], 16, 2, [2, 2], [1, 1], [1, 1]),
            (3, (23, 29), [7, 7], 24, 2, [2, 2], [3, 3], [1, 1]),
            (3, (27, 43), [11, 11], 20, 2, [4, 4], [0, 0], [1, 1]),
            (2, (13, 17), [3, 5], 11, 3, [1, 3], [2, 1], [2, 1]),
            (5, (8, 70), [2, 4], 12, 1, [2, 4], [1, 3], [1, 2]),
            (1, (9, 9), [3, 3], 8, 2, [3, 2], [4, 4], [2, 3]),
            (4, (9, 40), [3, 3], 8, 2, [1, 1], [1, 1], [1, 1]),
            (6, (7, 7), [5, 5], 10, 3, [1, 1], [2, 2], [1, 1]),
            (2, (11, 12), [3, 2], 9, 2, [1, 1], [0, 0], [2, 3]),
            (3, (40, 40), [7, 7], 64, 1, [2, 2], [3, 3], [1, 1]),
            // Copies made a band of output rows at a time: 40, 40 and 20
            // rows; two images side by side in the product's columns;
            // a dilated window at stride 1.
            (16, (200, 200), [3, 3], 8, 1, [2, 2], [1, 1], [1, 1]),
            (16, (180, 150), [3, 3], 12, 2, [2, 2], [1, 1], [1, 1]),
            (24, (130, 130), [3, 3], 8, 1, [1, 1], [2, 2], [2, 2]),
        ] {
            let g = geometry(window);
            let (cin, (h, w), cout, images) = (window.0, window.1, window.3, window.4);
            let Some(copies) = g.phase_copies::<f32>() else {
                assert_eq!(cpu::isa(), cpu::Isa::Baseline, "{g:?}");
                continue;
            };
            assert_eq!(copies.band.is_some(), cin >= 16, "{g:?}: {:?}", copies.band);
            let x = values(images * cin * h * w, 1);
            let weight = values(cout * g.patch(), 2);
            let (k, n) = (g.patch(), images * g.oh * g.ow);
            let mut col = vec![0.0; k * n];
            g.im2col(&x, 0, images, &mut col);
            let mut want = vec![f32::NAN; cout * n];
            let (a, b) = (Transpose::No, Transpose::No);
            cpu::gemm(a, b, cout, n, k, 1.0, &weight, &col, 0.0, &mut want);
            let mut got = vec![f32::NAN; cout * n];
            let mut scratch = vec![f32::NAN; copies.scratch_size(images)];
            product(
                &g,
                &copies,
                (&x, &weight),
                (0, images),
                &mut got,
                &mut scratch,
            );
            if cpu::gemm_filled_suits(cout, n, k) {
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{g:?}");
            } else {
                for (i, (&got, &want)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                        "{g:?}: {i}: {got} vs {want}"
                    );
                }
            }
        }
    }
}
