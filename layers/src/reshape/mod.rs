//! Caffe's Reshape: the same values under new dims (0 copies a bottom
//! dim, -1 is inferred); the top views the bottom's data and diff.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, Sharing, TopShape, bad_param, sub_param};
use crate::layer::Result;

const OP: &str = "reshape";

/// Caffe `Reshape`, never in place.
pub(crate) struct ReshapeLayer {
    dims: Vec<i64>,
    axis: i64,
    num_axes: i64,
}

impl ReshapeLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "reshape_param");
        let dims = p
            .message("shape")
            .map(|s| s.ints("dim"))
            .unwrap_or_default();
        if dims.iter().filter(|&&d| d == -1).count() > 1 {
            return Err(bad_param(
                "set up Reshape",
                "new shape contains multiple -1 dims",
            ));
        }
        if let Some(d) = dims.iter().find(|&&d| d < -1) {
            return Err(bad_param(
                "set up Reshape",
                format!("dim {d} is not a size (-1 infers one)"),
            ));
        }
        let num_axes = p.int("num_axes");
        if num_axes < -1 {
            return Err(bad_param(
                "set up Reshape",
                format!("num_axes must be >= 0, or -1 for all; got {num_axes}"),
            ));
        }
        Ok(Self {
            dims,
            axis: p.int("axis"),
            num_axes,
        })
    }
}

impl<T: MathElement> DynLayer<T> for ReshapeLayer {
    fn type_name(&self) -> &str {
        "Reshape"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let x = bottoms[0];
        let s = x.shape();
        let rank = s.len() as i64;
        let start = if self.axis >= 0 {
            self.axis
        } else {
            rank + self.axis + 1
        };
        if !(0..=rank).contains(&start) {
            return Err(bad_param(
                OP,
                format!(
                    "axis {} is out of range for {}",
                    self.axis,
                    x.shape_string()
                ),
            ));
        }
        let end = if self.num_axes == -1 {
            rank
        } else {
            start + self.num_axes
        };
        if end > rank {
            return Err(bad_param(
                OP,
                format!(
                    "end_axis = axis + num_axes is out of range: {} + {} for {}",
                    start,
                    self.num_axes,
                    x.shape_string()
                ),
            ));
        }
        let (start, end) = (start as usize, end as usize);
        let mut new = Vec::with_capacity(self.dims.len());
        let mut inferred = None;
        for (i, &d) in self.dims.iter().enumerate() {
            match d {
                0 => match s.get(start + i) {
                    Some(&copied) => new.push(copied),
                    None => {
                        return Err(bad_param(
                            OP,
                            format!(
                                "new shape contains a 0, but there was no corresponding bottom axis to copy (dim {i} of {})",
                                x.shape_string()
                            ),
                        ));
                    }
                },
                -1 => {
                    inferred = Some(new.len());
                    new.push(1);
                }
                d => new.push(d as usize),
            }
        }
        let mut dims: Vec<usize> = s[..start].to_vec();
        dims.extend_from_slice(&new);
        dims.extend_from_slice(&s[end..]);
        if let Some(at) = inferred {
            let known: usize = dims.iter().product();
            if known == 0 || !x.count().is_multiple_of(known) {
                return Err(bad_param(
                    OP,
                    format!(
                        "bottom count ({}) must be divisible by the product of the specified dimensions ({known})",
                        x.count()
                    ),
                ));
            }
            dims[start + at] = x.count() / known;
        }
        if dims.iter().product::<usize>() != x.count() {
            return Err(bad_param(
                OP,
                format!(
                    "output count {} differs from input count {} ({} from {})",
                    dims.iter().product::<usize>(),
                    x.count(),
                    blob_runtime::shape_string(&dims),
                    x.shape_string()
                ),
            ));
        }
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
