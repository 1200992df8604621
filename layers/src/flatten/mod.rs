//! Caffe's Flatten: axes `axis..=end_axis` merged into one; the top views
//! the bottom's data and diff, so nothing is computed.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, Sharing, TopShape, axis_of, sub_param};
use crate::layer::Result;

/// Caffe `Flatten`, never in place.
pub(crate) struct FlattenLayer {
    axis: i64,
    end_axis: i64,
}

impl FlattenLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Self {
        let p = sub_param(layer, "flatten_param");
        Self {
            axis: p.int("axis"),
            end_axis: p.int("end_axis"),
        }
    }
}

impl<T: MathElement> DynLayer<T> for FlattenLayer {
    fn type_name(&self) -> &str {
        "Flatten"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let x = bottoms[0];
        let start = axis_of(x, self.axis, "flatten")?;
        let end = axis_of(x, self.end_axis, "flatten")?;
        let s = x.shape();
        let mut dims = s[..start].to_vec();
        dims.push(s[start..=end.max(start)].iter().product());
        dims.extend_from_slice(&s[end.max(start) + 1..]);
        Ok(vec![TopShape::sharing(dims, 0, Sharing::DataAndDiff)])
    }

    fn forward(&mut self, _bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<()> {
        Ok(())
    }

    fn backward(
        &mut self,
        _tops: &[&Blob<T>],
        _down: &[bool],
        _bottoms: &[&Blob<T>],
    ) -> Result<()> {
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
