//! The SSD fork's Permute: the bottom's axes reordered (NCHW to NHWC for
//! SSD's heads), a gather forward and the matching scatter backward, on
//! the CPU or the GPU.

#[cfg(feature = "cuda")]
pub(crate) mod cuda;

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
        self.walk(tops[0].shape(), |to, from| y[to] = x[from]);
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
        self.walk(tops[0].shape(), |to, from| dx[from] = dy[to]);
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
