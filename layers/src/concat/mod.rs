//! Caffe's Concat: bottoms joined along one axis (GoogLeNet's inception
//! outputs, SqueezeNet's fire modules). It moves bytes only, on the host
//! whatever the device (the blobs' heads move them).

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, Sharing, TopShape, bad_param, sub_param};
use crate::layer::Result;

/// The axis a Concat or Slice cuts, from its parameter's `axis` or the
/// legacy `*_dim` (both given is an error, as in Caffe).
pub(crate) fn legacy_axis(p: &ParamMessage, legacy: &str, op: &'static str) -> Result<AxisChoice> {
    match (p.has("axis"), p.has(legacy)) {
        (true, true) => Err(bad_param(
            op,
            format!("Either axis or {legacy} should be specified; not both."),
        )),
        (false, true) => Ok(AxisChoice::Legacy(p.uint(legacy) as usize)),
        _ => Ok(AxisChoice::Axis(p.int("axis"))),
    }
}

/// An axis as given: a (possibly negative) `axis`, or a legacy dim.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AxisChoice {
    Axis(i64),
    Legacy(usize),
}

impl AxisChoice {
    /// The axis of `x` it names.
    pub(crate) fn of<T: MathElement>(self, x: &Blob<T>, op: &'static str) -> Result<usize> {
        match self {
            AxisChoice::Axis(a) => crate::dyn_layer::axis_of(x, a, op),
            AxisChoice::Legacy(d) if d < x.num_axes() => Ok(d),
            AxisChoice::Legacy(d) => Err(bad_param(
                op,
                format!(
                    "the legacy dim {d} is out of range for {}",
                    x.shape_string()
                ),
            )),
        }
    }
}

/// `(outer, inner)` counts around `axis`.
pub(crate) fn around<T: MathElement>(x: &Blob<T>, axis: usize) -> (usize, usize) {
    let s = x.shape();
    (s[..axis].iter().product(), s[axis + 1..].iter().product())
}

/// Where a part lies in the joined blob: `outer` slabs of `inner`
/// values per step of the axis, the joined axis `total` long, the part
/// `len` long from `offset`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slabs {
    pub outer: usize,
    pub inner: usize,
    pub total: usize,
    pub offset: usize,
    pub len: usize,
}

impl Slabs {
    /// The part's slab `n` in the joined blob, and in the part.
    fn ranges(&self, n: usize) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let size = self.len * self.inner;
        let at = (n * self.total + self.offset) * self.inner;
        (at..at + size, n * size..(n + 1) * size)
    }

    /// Copies the part into its place in the joined blob.
    pub(crate) fn join<T: Copy>(&self, part: &[T], joined: &mut [T]) {
        for n in 0..self.outer {
            let (j, p) = self.ranges(n);
            joined[j].copy_from_slice(&part[p]);
        }
    }

    /// Copies the part's place in the joined blob out to the part.
    pub(crate) fn split<T: Copy>(&self, joined: &[T], part: &mut [T]) {
        for n in 0..self.outer {
            let (j, p) = self.ranges(n);
            part[p].copy_from_slice(&joined[j]);
        }
    }
}

/// Caffe `Concat`.
pub(crate) struct ConcatLayer {
    axis: AxisChoice,
}

impl ConcatLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "concat_param");
        Ok(Self {
            axis: legacy_axis(&p, "concat_dim", "set up Concat")?,
        })
    }
}

impl<T: MathElement> DynLayer<T> for ConcatLayer {
    fn type_name(&self) -> &str {
        "Concat"
    }

    fn bottoms(&self) -> Arity {
        Arity::at_least(1)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let first = bottoms[0];
        let axis = self.axis.of(first, "concat")?;
        let mut dims = first.shape().to_vec();
        for b in &bottoms[1..] {
            if b.num_axes() != first.num_axes() {
                return Err(bad_param(
                    "concat",
                    format!(
                        "All inputs must have the same #axes: {} and {}",
                        first.shape_string(),
                        b.shape_string()
                    ),
                ));
            }
            let fits = (0..dims.len()).all(|j| j == axis || b.shape()[j] == first.shape()[j]);
            if !fits {
                return Err(bad_param(
                    "concat",
                    format!(
                        "All inputs must have the same shape, except at concat_axis {axis}: {} and {}",
                        first.shape_string(),
                        b.shape_string()
                    ),
                ));
            }
            dims[axis] += b.shape()[axis];
        }
        Ok(vec![if bottoms.len() == 1 {
            TopShape::sharing(dims, 0, Sharing::DataAndDiff)
        } else {
            TopShape::new(dims)
        }])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        if bottoms.len() == 1 {
            return Ok(());
        }
        let axis = self.axis.of(bottoms[0], "concat")?;
        let (outer, inner) = around(bottoms[0], axis);
        let total = tops[0].shape()[axis];
        let mut y = tops[0].mutable_cpu_data()?;
        let mut offset = 0;
        for b in bottoms {
            let len = b.shape()[axis];
            let slabs = Slabs {
                outer,
                inner,
                total,
                offset,
                len,
            };
            slabs.join(&b.cpu_data()?, &mut y);
            offset += len;
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if bottoms.len() == 1 {
            return Ok(());
        }
        let axis = self.axis.of(bottoms[0], "concat")?;
        let (outer, inner) = around(bottoms[0], axis);
        let total = tops[0].shape()[axis];
        let dy = tops[0].cpu_diff()?;
        let mut offset = 0;
        for (b, &down) in bottoms.iter().zip(propagate_down) {
            let len = b.shape()[axis];
            if down {
                let slabs = Slabs {
                    outer,
                    inner,
                    total,
                    offset,
                    len,
                };
                slabs.split(&dy, &mut b.mutable_cpu_diff()?);
            }
            offset += len;
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
