//! The CPU forward product of a convolution whose output planes are
//! small (ResNet-50's last stage at 7 x 7, MobileNet-SSD's 1x1 layers at
//! 10 x 10 and its heads at 5 x 5, 3 x 3 and 2 x 2), from weights packed
//! once and kept while they stay unchanged.
//!
//! Such a product `(cout x p) = W (cout x cin) · x (cin x p)` fills the
//! kernel's panels of 32 columns badly (49 outputs fill 49 of 64). As
//! its transpose, `(p x cout) = x^T W^T`, the pixels become the kernel's
//! rows (49 of 50) and the output channels its columns (all), but `W^T`
//! must be packed into the kernel's panels, which at every pass cost
//! what the fuller tiles saved (1.00x-1.07x alone). Packed once per
//! weight write (the blob's write stamp), as the Winograd weights are,
//! those layers ran 1.17x-1.26x faster in their nets on one Zen 5 core
//! (2.7x for the 3 x 3 and 2 x 2 heads; `cpu::gemm_packed_suits` gives
//! the measurements and the shapes). The sums are `gemm`'s, in the same
//! order: the same bits.
//!
//! The price is memory: each such layer keeps its weights twice (21 MB
//! more for ResNet-50's 102 MB, 8 MB for MobileNet-SSD's 23 MB).
//! Other layers (wider windows, strides) on small planes take packed
//! weights through im2col, one image at a time. With the transposed
//! product reading its rows from tiles, that beat the phase copies and
//! the strided copies on one Zen 4 core (2026-11-30, one thread, ms,
//! AVX2 / AVX-512): ResNet-50's res5a_branch1 (1x1, stride 2, 1024 ->
//! 2048 at 7 x 7) 4.3 -> 2.5 / 2.9 -> 2.2, its res5 3x3 layers 3.3 ->
//! 3.1 / 2.95 -> 2.6, MobileNet-SSD's conv14_2 (3x3, stride 2, at 5 x 5)
//! 0.91 -> 0.81 (AVX-512); the whole of ResNet-50
//! 79.4 -> 77.7 / 71 -> 66.7. On larger planes the copy costs more than
//! the fuller tiles save: res4a_branch1 (1x1, stride 2, at 14 x 14) ran
//! 2.23 -> 2.37 on AVX2 ([`SMALL_PLANE`] has the planes of 8 x 8 to 11 x
//! 11).

use std::any::TypeId;

use blob_kernels::cpu::{self, AlignedVec};
use blob_runtime::MathElement;

use super::cpu::ConvGeometry;
use crate::f32_view::as_f32;
use crate::layer::{Result, ensure};

/// The largest planes (in outputs, exclusive) whose layers other than
/// 1x1 at stride 1 take packed weights through im2col: four panels'
/// columns, as many as AVX-512's wide tiles leave to the transposed
/// product in `cpu::gemm_packed_suits`. At 10 x 10, 100 outputs filled
/// 100 of 112 columns in tiles of 16 (the last panel 4 of 16) and each
/// depth block past the first read C again; as the transpose, 10 tiles
/// of 10 rows and all of the channels. MobileNet-YOLOv2-lite's conv21
/// (3x3, 256 -> 1024 at 10 x 10, 9.4 MB of weights), one Zen 5 core
/// (2026-12-05, medians of alternating runs, ms): alone 2.27 -> 2.04 on
/// AVX-512 and 4.14 -> 4.05 on AVX2; in the net 2.34 -> 2.08, the pass
/// 13.16 -> 12.97 (AVX2 level, 24.57 -> 24.60); two threads 1.27 ->
/// 1.18, the pass level (7.13 -> 7.16).
const SMALL_PLANE: usize = 4 * cpu::PANEL_COLUMNS;

impl ConvGeometry {
    /// Whether this convolution's forward product runs from packed
    /// weights: `f32`, more than one output, in a shape
    /// [`cpu::gemm_packed_suits`], and either a 1x1 layer of stride 1 (each
    /// image's input its own column buffer) or any other over a plane of
    /// fewer than [`SMALL_PLANE`] outputs (through im2col).
    ///
    /// Among the second are the SSD heads' 3 x 3 layers at 3 x 3 and 2 x
    /// 2 (MobileNet-SSD's conv15_2 and conv16_2): as they are, each tile
    /// of the product lit 9 or 4 of its 32 columns. Through im2col and
    /// the transposed product, in the net on one Zen 4 core (2026-11-30,
    /// AVX-512): conv15_2 0.18 -> 0.12 ms, conv16_2 0.175 -> 0.108, both
    /// then bound by reading their 1.2 MB of weights. The module's text
    /// has the 7 x 7 and 5 x 5 planes'. Outputs of 9 pixels or fewer over
    /// a deep window are now taken as dots against the weights where they
    /// lie ([`ConvGeometry::takes_pixel_dots`]), faster again.
    pub(super) fn takes_packed_weights<T: 'static>(&self) -> bool {
        let p = self.oh * self.ow;
        TypeId::of::<T>() == TypeId::of::<f32>()
            && p > 1
            && !self.takes_pixel_dots::<T>()
            && (self.is_pointwise() || p < SMALL_PLANE && self.patch() > 0)
            && cpu::gemm_packed_suits(self.channels_out, p, self.patch())
    }
}

/// A convolution's weights packed for [`cpu::gemm_packed`], and the
/// weights' write stamp and shape they were packed from.
#[derive(Default)]
pub(crate) struct PackedWeights {
    values: AlignedVec<f32>,
    made_from: Option<(u64, usize, usize)>,
}

impl PackedWeights {
    /// The pack of `weight` (`cout x ckk`) for `g`, made again only when
    /// the weights' [`write_stamp`](blob_runtime::SyncedMemory::write_stamp)
    /// or shape changed; `None` where `g` does not
    /// [`take packed weights`](ConvGeometry::takes_packed_weights).
    pub(super) fn for_layer<T: MathElement>(
        &mut self,
        g: &ConvGeometry,
        weights_stamp: u64,
        weight: &[T],
    ) -> Result<Option<&[f32]>> {
        let (m, k) = (g.channels_out, g.patch());
        let Some(weight) = as_f32(weight).filter(|_| g.takes_packed_weights::<T>()) else {
            return Ok(None);
        };
        let len = cpu::gemm_packed_len(m, k);
        if self.made_from != Some((weights_stamp, m, k)) {
            self.made_from = None;
            ensure(&mut self.values, len)?;
            if !cpu::pack_for_gemm_packed(&weight[..m * k], m, k, &mut self.values) {
                return Ok(None);
            }
            self.made_from = Some((weights_stamp, m, k));
        }
        Ok(Some(&self.values[..len]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::cpu::{ConvScratch, Finish, forward};
    use crate::conv::test_support::{geometry, values};

    /// Each layer that takes packed weights gives the bits of the same
    /// layer run from its weights as they are (the product is `gemm`'s,
    /// in the same order): 1x1 layers on small planes, strided ones (as
    /// ResNet-50's res5a_branch1), 3 x 3 windows over 7 x 7 outputs (its
    /// res5 layers, two images), over 10 x 10 (MobileNet-YOLOv2-lite's
    /// conv21) and the SSD heads' over 5 x 5 ones, one image and three
    /// (9 pixels or fewer take dots instead,
    /// [`ConvGeometry::takes_pixel_dots`]); after a new write of the
    /// weights, the pack is made again.
    #[test]
    fn packed_weights_give_the_unpacked_products_bits() {
        // (cin, (h, w), kernel, cout, images, stride, pad, dilation)
        let windows = [
            (512, (7, 7), [1, 1], 512, 1, [1, 1], [0, 0], [1, 1]),
            (256, (14, 14), [1, 1], 512, 1, [2, 2], [0, 0], [1, 1]),
            (128, (7, 7), [3, 3], 512, 2, [1, 1], [1, 1], [1, 1]),
            (256, (10, 10), [3, 3], 512, 1, [2, 2], [1, 1], [1, 1]),
            (128, (10, 10), [3, 3], 512, 3, [2, 2], [1, 1], [1, 1]),
            (24, (4, 4), [3, 3], 70, 1, [1, 1], [0, 0], [1, 1]),
            (64, (10, 10), [3, 3], 512, 1, [1, 1], [1, 1], [1, 1]),
        ];
        for (n, window) in windows.into_iter().enumerate() {
            let g = geometry(window);
            let x = values(g.batch * g.channels_in * g.h * g.w, 1 + n as u32);
            let bias = values(g.channels_out, 40 + n as u32);
            let run = |weight: &[f32], packed: Option<&[f32]>| {
                let per_image = g.channels_out * g.oh * g.ow;
                let mut y = vec![f32::NAN; g.batch * per_image];
                let finish = Finish {
                    bias: &bias,
                    activation: None,
                };
                let mut scratch = ConvScratch::default();
                let out = (&mut y[..], per_image);
                forward(&g, &mut scratch, &x, (weight, packed), finish, out).unwrap();
                y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            let mut pack = PackedWeights::default();
            for stamp in [1, 2] {
                let weight = values(g.channels_out * g.patch(), 80 + stamp as u32);
                let packed = pack.for_layer(&g, stamp, &weight).unwrap();
                assert_eq!(
                    packed.is_some(),
                    cpu::isa() >= cpu::Isa::Avx2,
                    "{window:?} takes packed weights where the kernels run"
                );
                let packed = packed.map(<[f32]>::to_vec);
                assert_eq!(
                    run(&weight, packed.as_deref()),
                    run(&weight, None),
                    "{window:?}, weights written {stamp} times"
                );
            }
        }
    }
}
