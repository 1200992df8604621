//! The SSD fork's Permute: the bottom's axes reordered (NCHW to NHWC for
//! SSD's heads), a gather forward and the matching scatter backward, on
//! the CPU or the GPU.

#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use blob_kernels::cpu;
use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, Sharing, TopShape, bad_param, sub_param};
use crate::layer::Result;
#[cfg(feature = "cuda")]
pub(crate) use cuda::PERMUTE;

/// SSD `Permute`, never in place (the top is written while the bottom is
/// still read).
pub(crate) struct PermuteLayer {
    given: Vec<usize>,
    /// The full order for the rank seen at the first reshape (the fork
    /// fixes it at `LayerSetUp`).
    order: Vec<usize>,
    /// For each top axis, the bottom stride it walks.
    strides: Vec<usize>,
    /// Where the order is a batch of transposes ([`transposes`]).
    transposes: Option<Transposes>,
}

/// An order that keeps the leading axes and rotates the rest (SSD's
/// NCHW to NHWC, `[0, 2, 3, 1]`): each of `matrices` bottom blocks is a
/// row-major `rows x columns` matrix (its axes before and from the
/// rotation's point), the top's block its transpose.
#[derive(Clone, Copy, Debug)]
struct Transposes {
    matrices: usize,
    rows: usize,
    columns: usize,
}

/// The [`Transposes`] `order` makes of a bottom of `shape`, if it is one.
fn transposes(order: &[usize], shape: &[usize]) -> Option<Transposes> {
    let rank = order.len();
    let kept = order
        .iter()
        .enumerate()
        .take_while(|&(i, &a)| i == a)
        .count();
    let from = *order.get(kept)?;
    let rotated = (from..rank).chain(kept..from);
    if !order[kept..].iter().copied().eq(rotated) {
        return None;
    }
    let size = |axes: std::ops::Range<usize>| shape[axes].iter().product::<usize>();
    Some(Transposes {
        matrices: size(0..kept),
        rows: size(kept..from),
        columns: size(from..rank),
    })
}

impl Transposes {
    /// `to`'s blocks, each `from`'s block transposed: `[rows, columns]`
    /// forward, `[columns, rows]` backward.
    fn apply<T: Copy + 'static>(self, from: &[T], [rows, columns]: [usize; 2], to: &mut [T]) {
        let block = rows * columns;
        if block == 0 {
            return;
        }
        for (from, to) in from
            .chunks_exact(block)
            .zip(to.chunks_exact_mut(block))
            .take(self.matrices)
        {
            cpu::transpose(from, [rows, columns], to);
        }
    }
}

impl PermuteLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "permute_param");
        let given: Vec<usize> = p.uints("order").into_iter().map(|v| v as usize).collect();
        for (i, a) in given.iter().enumerate() {
            if given[..i].contains(a) {
                return Err(bad_param(
                    "set up Permute",
                    format!("there are duplicate orders: axis {a} is listed twice"),
                ));
            }
        }
        Ok(Self {
            given,
            order: Vec::new(),
            strides: Vec::new(),
            transposes: None,
        })
    }

    /// The order for a `rank`-D bottom: the listed axes, then the rest in
    /// increasing order.
    fn full_order(&self, rank: usize) -> Result<Vec<usize>> {
        if let Some(&a) = self.given.iter().find(|&&a| a >= rank) {
            return Err(bad_param(
                "permute",
                format!(
                    "order should be less than the input dimension: axis {a} of a {rank}-D input"
                ),
            ));
        }
        let mut order = self.given.clone();
        order.extend((0..rank).filter(|a| !self.given.contains(a)));
        Ok(order)
    }

    fn is_identity(&self) -> bool {
        self.order.iter().enumerate().all(|(i, &a)| i == a)
    }

    /// Calls `visit(top_index, bottom_index)` for every element, top in
    /// order.
    fn walk(&self, dims: &[usize], mut visit: impl FnMut(usize, usize)) {
        let count: usize = dims.iter().product();
        if count == 0 {
            return;
        }
        let mut at = vec![0usize; dims.len()];
        let mut from = 0usize;
        for to in 0..count {
            visit(to, from);
            // Advance the top's multi-index, the bottom offset with it.
            for axis in (0..dims.len()).rev() {
                at[axis] += 1;
                from += self.strides[axis];
                if at[axis] < dims[axis] {
                    break;
                }
                from -= self.strides[axis] * dims[axis];
                at[axis] = 0;
            }
        }
    }
}

impl<T: MathElement> DynLayer<T> for PermuteLayer {
    fn type_name(&self) -> &str {
        "Permute"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let x = bottoms[0];
        let shape = x.shape();
        if self.order.is_empty() {
            self.order = self.full_order(shape.len())?;
        } else if self.order.len() != shape.len() {
            return Err(bad_param(
                "permute",
                format!(
                    "the layer was set up for {}-D inputs; this one is {}-D, shape {}",
                    self.order.len(),
                    shape.len(),
                    x.shape_string()
                ),
            ));
        }
        let dims: Vec<usize> = self.order.iter().map(|&a| shape[a]).collect();
        if self.is_identity() {
            return Ok(vec![TopShape::sharing(dims, 0, Sharing::DataAndDiff)]);
        }
        let mut bottom_strides = vec![1usize; shape.len()];
        for a in (0..shape.len().saturating_sub(1)).rev() {
            bottom_strides[a] = bottom_strides[a + 1] * shape[a + 1];
        }
        self.strides = self.order.iter().map(|&a| bottom_strides[a]).collect();
        self.transposes = transposes(&self.order, shape);
        Ok(vec![TopShape::new(dims)])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        if self.is_identity() {
            return Ok(());
        }
        #[cfg(feature = "cuda")]
        if let Some(walk) = cuda::Walk::new(tops[0].shape(), &self.strides, 0)
            && let Some(gpu) = crate::gpu::gpu_for("permute", bottoms[0], &[("output", tops[0])])?
        {
            use crate::gpu::{as_f32, read, write};
            let (x, y) = (as_f32(bottoms[0]), as_f32(tops[0]));
            let (xg, mut yg) = (x.gpu_data()?, y.mutable_gpu_data()?);
            let (from, mut to) = (read(&xg, x.count())?, write(&mut yg, y.count())?);
            return walk.gather(&gpu, "permute on the GPU", &from, &mut to);
        }
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        match self.transposes {
            // A transpose a block, through the cache-sized tiles of
            // `cpu::transpose`: a value at a time, MobileNet-SSD's 63 x
            // 361 conv11_mbox_conf_perm took 0.060 ms.
            Some(t) => t.apply(&x, [t.rows, t.columns], &mut y),
            None => self.walk(tops[0].shape(), |to, from| y[to] = x[from]),
        }
        Ok(())
    }

    fn backward(&mut self, tops: &[&Blob<T>], down: &[bool], bottoms: &[&Blob<T>]) -> Result<()> {
        if !down[0] || self.is_identity() {
            return Ok(());
        }
        #[cfg(feature = "cuda")]
        if let Some(walk) = cuda::Walk::new(tops[0].shape(), &self.strides, 0)
            && let Some(gpu) = crate::gpu::gpu_for("permute", bottoms[0], &[("output", tops[0])])?
        {
            use crate::gpu::{as_f32, read, write};
            let (x, y) = (as_f32(bottoms[0]), as_f32(tops[0]));
            let (dyg, mut dxg) = (y.gpu_diff()?, x.mutable_gpu_diff()?);
            let (from, mut to) = (read(&dyg, y.count())?, write(&mut dxg, x.count())?);
            return walk.scatter(&gpu, "permute on the GPU", &from, &mut to);
        }
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        match self.transposes {
            Some(t) => t.apply(&dy, [t.columns, t.rows], &mut dx),
            None => self.walk(tops[0].shape(), |to, from| dx[from] = dy[to]),
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

    /// Each order that keeps leading axes and rotates the rest moves
    /// every value where the value-by-value walk does, and back; other
    /// orders are left to the walk.
    #[test]
    fn transposes_move_each_value_where_the_walk_does() {
        let shape = [2, 17, 6, 5];
        let count: usize = shape.iter().product();
        let mut bottom_strides = [1; 4];
        for a in (0..3).rev() {
            bottom_strides[a] = bottom_strides[a + 1] * shape[a + 1];
        }
        let x: Vec<f32> = (0..count).map(|v| v as f32).collect();
        for order in [
            [0, 2, 3, 1],
            [1, 2, 3, 0],
            [2, 3, 0, 1],
            [0, 1, 3, 2],
            [3, 0, 1, 2],
            [0, 2, 1, 3],
            [1, 0, 3, 2],
        ] {
            let layer = PermuteLayer {
                given: order.to_vec(),
                order: order.to_vec(),
                strides: order.iter().map(|&a| bottom_strides[a]).collect(),
                transposes: transposes(&order, &shape),
            };
            let rotation = !matches!(order, [0, 2, 1, 3] | [1, 0, 3, 2]);
            assert_eq!(layer.transposes.is_some(), rotation, "{order:?}");
            let dims: Vec<usize> = order.iter().map(|&a| shape[a]).collect();
            let mut want = vec![f32::NAN; count];
            layer.walk(&dims, |to, from| want[to] = x[from]);
            if let Some(t) = layer.transposes {
                let mut got = vec![f32::NAN; count];
                t.apply(&x, [t.rows, t.columns], &mut got);
                assert_eq!(got, want, "{order:?}");
                let mut back = vec![f32::NAN; count];
                t.apply(&got, [t.columns, t.rows], &mut back);
                assert_eq!(back, x, "{order:?}, backward");
            }
        }
    }
}
