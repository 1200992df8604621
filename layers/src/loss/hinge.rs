//! Caffe's `HingeLoss`: the one-vs-all hinge over each item's scores,
//! L1 or L2.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::{Loss, class_labels, num};
use crate::dyn_layer::sub_param;
use crate::layer::Result;

/// Caffe `HingeLoss`: scores `(N, K, ...)` and one label per item. Each
/// score's margin is `max(0, 1 - x)` for the item's class and
/// `max(0, 1 + x)` for the others; the loss is their sum (L1) or sum of
/// squares (L2) over `N`.
pub(crate) struct HingeLoss {
    squared: bool,
}

impl HingeLoss {
    /// Reads `hinge_loss_param.norm` (L1 by default).
    pub(crate) fn from_param(layer: &ParamMessage) -> Self {
        Self {
            squared: sub_param(layer, "hinge_loss_param").enum_name("norm") == "L2",
        }
    }

    /// Each score's signed margin: `-max(0, 1 - x)` at the item's class,
    /// `max(0, 1 + x)` elsewhere (Caffe's `bottom_diff` after the flip
    /// back), so that its sign is the gradient's; and the items.
    fn margins<T: MathElement>(bottoms: &[&Blob<T>]) -> Result<(Vec<f64>, usize)> {
        let n = num(bottoms[0]);
        let dim = bottoms[0].count() / n.max(1);
        let classes = class_labels(Self::TYPE, bottoms[1], n, dim)?;
        let mut m: Vec<f64> = bottoms[0].cpu_data()?.iter().map(|v| v.to_f64()).collect();
        for (i, &c) in classes.iter().enumerate() {
            m[i * dim + c] = -m[i * dim + c];
        }
        for v in &mut m {
            *v = (1.0 + *v).max(0.0);
        }
        for (i, &c) in classes.iter().enumerate() {
            m[i * dim + c] = -m[i * dim + c];
        }
        Ok((m, n.max(1)))
    }
}

impl Loss for HingeLoss {
    const TYPE: &'static str = "HingeLoss";
    const BOTTOMS: usize = 2;
    const LABELS: Option<(usize, &'static str)> = Some((1, "label"));

    /// The labels are checked as the loss reads them.
    fn check_shapes<T: MathElement>(&self, _bottoms: &[&Blob<T>]) -> Result<()> {
        Ok(())
    }

    fn loss<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<f64> {
        let (m, n) = Self::margins(bottoms)?;
        let sum: f64 = if self.squared {
            m.iter().map(|v| v * v).sum()
        } else {
            m.iter().map(|v| v.abs()).sum()
        };
        Ok(sum / n as f64)
    }

    fn gradients<T: MathElement>(
        &self,
        bottoms: &[&Blob<T>],
        weight: f64,
        _down: &[bool],
    ) -> Result<()> {
        let (m, n) = Self::margins(bottoms)?;
        let scale = weight / n as f64;
        for (g, &v) in bottoms[0].mutable_cpu_diff()?.iter_mut().zip(&m) {
            let slope = if self.squared {
                2.0 * v
            } else {
                // caffe_cpu_sign: 0 where the margin is 0.
                f64::from(i8::from(v > 0.0) - i8::from(v < 0.0))
            };
            *g = T::from_f64(slope * scale);
        }
        Ok(())
    }
}
