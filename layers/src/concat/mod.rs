//! Caffe's Concat: bottoms joined along one axis (GoogLeNet's inception
//! outputs, SqueezeNet's fire modules). It moves bytes only, on the GPU
//! where the blobs live there.

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, Sharing, TopShape, bad_param, sub_param};
use crate::layer::Result;

#[cfg(feature = "cuda")]
pub(crate) use cuda::CONCAT;

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

/// Every blob of a Concat or Slice but the first bottom, for
/// [`gpu_for`](crate::gpu::gpu_for) to check they share its device.
#[cfg(feature = "cuda")]
pub(crate) fn others<'a, T: MathElement>(
    bottoms: &[&'a Blob<T>],
    tops: &[&'a Blob<T>],
) -> Vec<(&'static str, &'a Blob<T>)> {
    let rest = bottoms[1..].iter().map(|b| ("another bottom", *b));
    rest.chain(tops.iter().map(|t| ("a top", *t))).collect()
}

/// Where each of `parts` lies along `axis` of the joined blob, in order.
pub(crate) fn slabs_of<T: MathElement>(
    parts: &[&Blob<T>],
    axis: usize,
    outer: usize,
    inner: usize,
    total: usize,
) -> Vec<Slabs> {
    let mut offset = 0;
    parts
        .iter()
        .map(|p| {
            let len = p.shape()[axis];
            let slabs = Slabs {
                outer,
                inner,
                total,
                offset,
                len,
            };
            offset += len;
            slabs
        })
        .collect()
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
        let parts = slabs_of(bottoms, axis, outer, inner, total);
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("concat", bottoms[0], &others(bottoms, tops))? {
            use crate::gpu::{as_f32, read, write};
            let y = as_f32(tops[0]);
            let mut yg = y.mutable_gpu_data()?;
            let mut yv = write(&mut yg, y.count())?;
            for (b, slabs) in bottoms.iter().zip(&parts) {
                let xg = as_f32(b).gpu_data()?;
                slabs.join_on(&gpu, &read(&xg, b.count())?, &mut yv)?;
            }
            return Ok(());
        }
        let mut y = tops[0].mutable_cpu_data()?;
        for (b, slabs) in bottoms.iter().zip(&parts) {
            slabs.join(&b.cpu_data()?, &mut y);
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
        let parts = slabs_of(bottoms, axis, outer, inner, total);
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("concat", bottoms[0], &others(bottoms, tops))? {
            use crate::gpu::{as_f32, read, write};
            let y = as_f32(tops[0]);
            let dyg = y.gpu_diff()?;
            let dy = read(&dyg, y.count())?;
            for ((b, slabs), &down) in bottoms.iter().zip(&parts).zip(propagate_down) {
                if down {
                    let mut dxg = as_f32(b).mutable_gpu_diff()?;
                    slabs.split_on(&gpu, &dy, &mut write(&mut dxg, b.count())?)?;
                }
            }
            return Ok(());
        }
        let dy = tops[0].cpu_diff()?;
        for ((b, slabs), &down) in bottoms.iter().zip(&parts).zip(propagate_down) {
            if down {
                slabs.split(&dy, &mut b.mutable_cpu_diff()?);
            }
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
