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

/// Below this many values a Concat copies on one core.
const PARALLEL_JOIN_MIN: usize = 1 << 16;

/// Copies every part into its slabs of `joined`, the slabs shared out
/// over the cores for a large blob: the copies are memory-bound, and two
/// cores move more bytes than one (SqueezeNet's fire concats at batch 10,
/// 1.2 ms on one core or two before).
fn join_all<T: Copy + Send + Sync>(parts: &[Slabs], values: &[&[T]], joined: &mut [T]) {
    let total = joined.len();
    let mut copies = Vec::with_capacity(parts.len() * parts.first().map_or(0, |p| p.outer));
    let mut rest = &mut joined[..];
    for n in 0..parts.first().map_or(0, |p| p.outer) {
        // Slab n of every part, in order, tiles the joined blob's slab n.
        for (slabs, part) in parts.iter().zip(values) {
            let (to, from) = slabs.ranges(n);
            debug_assert_eq!(to.start, total - rest.len(), "slabs tile the joined blob");
            let (dst, after) = std::mem::take(&mut rest).split_at_mut(to.len());
            copies.push((&part[from], dst));
            rest = after;
        }
    }
    let copy = |(from, to): (&[T], &mut [T])| to.copy_from_slice(from);
    if total < PARALLEL_JOIN_MIN {
        copies.into_iter().for_each(copy);
    } else {
        blob_kernels::cpu::on_cores(copies, copy);
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

    fn joins_channels(&self, bottoms: &[&Blob<T>]) -> bool {
        bottoms.len() > 1 && matches!(self.axis.of(bottoms[0], "concat"), Ok(1))
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
        let reads = bottoms
            .iter()
            .map(|b| b.cpu_data())
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let reads: Vec<&[T]> = reads.iter().map(|r| &r[..]).collect();
        join_all(&parts, &reads, &mut tops[0].mutable_cpu_data()?);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts of 1, 3 and 2 along the axis, `outer` slabs of `inner`, as
    /// the joined blob holds them: slab by slab, part by part.
    fn joined_by_hand(outer: usize, inner: usize) -> (Vec<Slabs>, Vec<Vec<u32>>, Vec<u32>) {
        let lens = [1, 3, 2];
        let total = lens.iter().sum();
        let mut offset = 0;
        let mut parts = Vec::new();
        let mut values: Vec<Vec<u32>> = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            parts.push(Slabs {
                outer,
                inner,
                total,
                offset,
                len,
            });
            values.push(
                (0..outer * len * inner)
                    .map(|v| (i as u32) << 28 | v as u32)
                    .collect(),
            );
            offset += len;
        }
        let mut want = Vec::new();
        for n in 0..outer {
            for (p, v) in parts.iter().zip(&values) {
                want.extend_from_slice(&v[n * p.len * inner..][..p.len * inner]);
            }
        }
        (parts, values, want)
    }

    #[test]
    fn joins_put_every_slab_in_place_on_one_core_or_several() {
        // 6 x 5 x 7 values on one core; 3 x 6 x 5,000 past the parallel cut.
        for (outer, inner) in [(5, 7), (3, 5_000)] {
            let (parts, values, want) = joined_by_hand(outer, inner);
            let values: Vec<&[u32]> = values.iter().map(|v| &v[..]).collect();
            let mut joined = vec![u32::MAX; want.len()];
            join_all(&parts, &values, &mut joined);
            assert_eq!(joined, want, "outer {outer}, inner {inner}");
        }
    }
}
