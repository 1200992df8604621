//! Caffe's ArgMax: the indices (or values) of the `top_k` largest entries
//! of each item or along an axis, ties to the larger index as Caffe's
//! partial sort leaves them. Forward only; `f32` blobs on a GPU rank
//! there (`cuda.rs`), where Caffe ranks on the host.

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, axis_of, bad_param, sub_param};
use crate::layer::Result;
#[cfg(feature = "cuda")]
pub(crate) use cuda::ARGMAX;

/// What one forward pass ranks: `items` runs of `span` values (each
/// `inner` apart) per position of `inner`, keeping `top_k`.
#[derive(Clone, Copy)]
pub(crate) struct Ranking {
    items: usize,
    span: usize,
    inner: usize,
    top_k: usize,
    out_max_val: bool,
    along_axis: bool,
}

/// Caffe `ArgMax`.
pub(crate) struct ArgMaxLayer {
    out_max_val: bool,
    top_k: usize,
    axis: Option<i64>,
}

impl ArgMaxLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "argmax_param");
        let top_k = p.uint("top_k") as usize;
        if top_k < 1 {
            return Err(bad_param(
                "set up ArgMax",
                "top_k must be equal to or greater than one",
            ));
        }
        Ok(Self {
            out_max_val: p.boolean("out_max_val"),
            top_k,
            axis: p.has("axis").then(|| p.int("axis")),
        })
    }

    /// What a pass over `x` ranks: along the axis, or each item's values.
    fn ranking<T: MathElement>(&self, x: &Blob<T>) -> Result<Ranking> {
        let shape = x.shape();
        let (items, span, inner) = match self.axis {
            Some(axis) => {
                let a = axis_of(x, axis, "argmax")?;
                (
                    shape[..a].iter().product(),
                    shape[a],
                    shape[a + 1..].iter().product(),
                )
            }
            None => {
                let items = shape.first().copied().unwrap_or(1);
                (items, x.count() / items.max(1), 1)
            }
        };
        Ok(Ranking {
            items,
            span,
            inner,
            top_k: self.top_k,
            out_max_val: self.out_max_val,
            along_axis: self.axis.is_some(),
        })
    }
}

impl<T: MathElement> DynLayer<T> for ArgMaxLayer {
    fn type_name(&self) -> &str {
        "ArgMax"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let x = bottoms[0];
        let shape = x.shape();
        let (dims, span) = match self.axis {
            Some(axis) => {
                let a = axis_of(x, axis, "argmax")?;
                let mut dims = shape.to_vec();
                dims[a] = self.top_k;
                (dims, shape[a])
            }
            None => {
                let mut dims = vec![1; shape.len().max(3)];
                dims[0] = shape.first().copied().unwrap_or(1);
                dims[2] = self.top_k;
                if self.out_max_val {
                    dims[1] = 2;
                }
                let span = x.count() / dims[0].max(1);
                (dims, span)
            }
        };
        if self.top_k > span {
            return Err(bad_param(
                "argmax",
                format!(
                    "top_k {} must be less than or equal to the {span} values it ranks in {}",
                    self.top_k,
                    x.shape_string()
                ),
            ));
        }
        Ok(vec![TopShape::new(dims)])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let x = bottoms[0];
        let r = self.ranking(x)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("argmax", x, &[("output", tops[0])])? {
            use crate::gpu::as_f32;
            return cuda::forward(&gpu, r, as_f32(x), as_f32(tops[0]));
        }
        let data = x.cpu_data()?;
        let mut top = tops[0].mutable_cpu_data()?;
        let (span, inner, k) = (r.span, r.inner, r.top_k);
        let mut pairs: Vec<(f64, usize)> = Vec::with_capacity(span);
        for item in 0..r.items {
            for i in 0..inner {
                pairs.clear();
                pairs.extend((0..span).map(|j| (data[(item * span + j) * inner + i].to_f64(), j)));
                // Descending by (value, index): ties to the larger index.
                pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
                for (rank, &(value, index)) in pairs[..k].iter().enumerate() {
                    if r.along_axis {
                        let at = (item * k + rank) * inner + i;
                        top[at] = T::from_f64(if r.out_max_val { value } else { index as f64 });
                    } else {
                        let width = if r.out_max_val { 2 * k } else { k };
                        top[item * width + rank] = T::from_f64(index as f64);
                        if r.out_max_val {
                            top[item * width + k + rank] = T::from_f64(value);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn backward(&mut self, _tops: &[&Blob<T>], down: &[bool], _bottoms: &[&Blob<T>]) -> Result<()> {
        if down[0] {
            return Err(bad_param(
                "argmax",
                "ArgMax has no backward pass (as in Caffe)",
            ));
        }
        Ok(())
    }

    fn allow_force_backward(&self, _bottom: usize) -> bool {
        false
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
