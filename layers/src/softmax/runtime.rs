//! Caffe's Softmax as a run-time layer, over any axis.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, axis_of, sub_param};
use crate::layer::Result;

/// Caffe `Softmax` over `axis` (default 1): per-item class
/// probabilities of `(N, C)`, per-pixel ones of `(N, C, H, W)`.
pub(crate) struct SoftmaxLayer {
    axis: i64,
}

impl SoftmaxLayer {
    /// Reads the layer's `softmax_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Self {
        Self {
            axis: sub_param(layer, "softmax_param").int("axis"),
        }
    }

    /// `(outer, classes, inner)` for an input.
    fn dims<T: MathElement>(&self, x: &Blob<T>) -> Result<(usize, usize, usize)> {
        let axis = axis_of(x, self.axis, "softmax")?;
        let s = x.shape();
        Ok((
            s[..axis].iter().product(),
            s[axis],
            s[axis + 1..].iter().product(),
        ))
    }
}

impl<T: MathElement> DynLayer<T> for SoftmaxLayer {
    fn type_name(&self) -> &str {
        "Softmax"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        self.dims(bottoms[0])?;
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let dims = self.dims(bottoms[0])?;
        super::forward(bottoms[0], tops[0], dims)
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        let dims = self.dims(bottoms[0])?;
        super::backward(bottoms[0], tops[0], dims)
    }
}
