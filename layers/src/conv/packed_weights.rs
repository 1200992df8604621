//! The CPU forward product of a 1x1 convolution whose output planes are
//! small (ResNet-50's last stage at 7 x 7, MobileNet-SSD's layers at 10 x
//! 10 and its heads at 3 x 3 and 2 x 2), from weights packed once and
//! kept while they stay unchanged.
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
//! Wider windows stay with the phase copies: built through im2col
//! (4,608 runs of 7 values for ResNet's 3 x 3 layers at 7 x 7), the
//! transposed product ran 0.87x-1.07x of theirs.

use std::any::TypeId;

use blob_kernels::cpu;
use blob_runtime::MathElement;

use super::cpu::ConvGeometry;
use crate::f32_view::as_f32;
use crate::layer::{Result, ensure};

impl ConvGeometry {
    /// Whether this convolution's forward product runs from packed
    /// weights: `f32`, a 1x1 layer (each image's input its own column
    /// buffer) of more than one output, in a shape
    /// [`cpu::gemm_packed_suits`].
    pub(super) fn takes_packed_weights<T: 'static>(&self) -> bool {
        let p = self.oh * self.ow;
        TypeId::of::<T>() == TypeId::of::<f32>()
            && self.is_pointwise()
            && p > 1
            && cpu::gemm_packed_suits(self.channels_out, p, self.channels_in)
    }
}

/// A convolution's weights packed for [`cpu::gemm_packed`], and the
/// weights' write stamp and shape they were packed from.
#[derive(Default)]
pub(crate) struct PackedWeights {
    values: Vec<f32>,
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
