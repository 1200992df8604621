//! Caffe's Crop: a window of the first bottom, as large as the second
//! bottom from `axis` on, at the given offsets (FCN's score alignment); on
//! the GPU by Permute's strided moves.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, axis_of, bad_param, sub_param};
use crate::layer::Result;

/// Caffe `Crop`, never in place.
pub(crate) struct CropLayer {
    axis: i64,
    given: Vec<usize>,
    /// The offset on every axis, resolved at reshape (0 before `axis`).
    offsets: Vec<usize>,
}

impl CropLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Self {
        let p = sub_param(layer, "crop_param");
        Self {
            axis: p.int("axis"),
            given: p.uints("offset").into_iter().map(|v| v as usize).collect(),
            offsets: Vec::new(),
        }
    }

    /// Calls `copy(top_row, bottom_row)` with the start of every innermost
    /// row of the window, `top` being the window's shape.
    fn rows(&self, bottom: &[usize], top: &[usize], mut copy: impl FnMut(usize, usize)) {
        let rank = top.len();
        if rank == 0 {
            copy(0, 0);
            return;
        }
        let mut strides = vec![1usize; rank];
        for a in (0..rank - 1).rev() {
            strides[a] = strides[a + 1] * bottom[a + 1];
        }
        let rows: usize = top[..rank - 1].iter().product();
        let mut at = vec![0usize; rank - 1];
        for row in 0..rows {
            let from = (0..rank - 1)
                .map(|a| (at[a] + self.offsets[a]) * strides[a])
                .sum::<usize>()
                + self.offsets[rank - 1];
            copy(row * top[rank - 1], from);
            for a in (0..rank - 1).rev() {
                at[a] += 1;
                if at[a] < top[a] {
                    break;
                }
                at[a] = 0;
            }
        }
    }
}

/// The window of `top` in a bottom of `bottom`, as the GPU's strided
/// moves walk it.
#[cfg(feature = "cuda")]
fn window_walk(
    bottom: &[usize],
    top: &[usize],
    offsets: &[usize],
) -> Option<crate::permute::cuda::Walk> {
    let mut strides = vec![1usize; bottom.len()];
    for a in (0..bottom.len().saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * bottom[a + 1];
    }
    let base = offsets.iter().zip(&strides).map(|(o, s)| o * s).sum();
    crate::permute::cuda::Walk::new(top, &strides, base)
}

impl<T: MathElement> DynLayer<T> for CropLayer {
    fn type_name(&self) -> &str {
        "Crop"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let (x, like) = (bottoms[0], bottoms[1]);
        if x.num_axes() != like.num_axes() {
            return Err(bad_param(
                "crop",
                format!(
                    "the bottoms {} and {} differ in their number of axes",
                    x.shape_string(),
                    like.shape_string()
                ),
            ));
        }
        let start = axis_of(x, self.axis, "crop")?;
        let cropped = x.num_axes() - start;
        if !matches!(self.given.len(), 0 | 1) && self.given.len() != cropped {
            return Err(bad_param(
                "crop",
                format!(
                    "number of offsets is not equal to number of dimensions: {} offsets for {cropped} axes from axis {start}",
                    self.given.len()
                ),
            ));
        }
        let mut dims = x.shape().to_vec();
        self.offsets = vec![0; dims.len()];
        for (a, dim) in dims.iter_mut().enumerate().skip(start) {
            let offset = match self.given.len() {
                0 => 0,
                1 => self.given[0],
                _ => self.given[a - start],
            };
            let want = like.shape()[a];
            if *dim < want + offset {
                return Err(bad_param(
                    "crop",
                    format!(
                        "the crop for dimension {a} is out-of-bounds with size {want} and offset {offset} of an axis of {dim}"
                    ),
                ));
            }
            *dim = want;
            self.offsets[a] = offset;
        }
        Ok(vec![TopShape::new(dims)])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (shape, window) = (bottoms[0].shape(), tops[0].shape());
        #[cfg(feature = "cuda")]
        if let Some(walk) = window_walk(shape, window, &self.offsets)
            && let Some(gpu) = crate::gpu::gpu_for("crop", bottoms[0], &[("output", tops[0])])?
        {
            use crate::gpu::{as_f32, read, write};
            let (x, y) = (as_f32(bottoms[0]), as_f32(tops[0]));
            let (xg, mut yg) = (x.gpu_data()?, y.mutable_gpu_data()?);
            let (from, mut to) = (read(&xg, x.count())?, write(&mut yg, y.count())?);
            return walk.gather(&gpu, "crop on the GPU", &from, &mut to);
        }
        let len = window.last().copied().unwrap_or(1);
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        if y.is_empty() {
            return Ok(());
        }
        self.rows(shape, window, |to, from| {
            y[to..to + len].copy_from_slice(&x[from..from + len]);
        });
        Ok(())
    }

    fn backward(&mut self, tops: &[&Blob<T>], down: &[bool], bottoms: &[&Blob<T>]) -> Result<()> {
        if !down[0] {
            return Ok(());
        }
        let (shape, window) = (bottoms[0].shape(), tops[0].shape());
        #[cfg(feature = "cuda")]
        if let Some(walk) = window_walk(shape, window, &self.offsets)
            && let Some(gpu) = crate::gpu::gpu_for("crop", bottoms[0], &[("output", tops[0])])?
        {
            use crate::gpu::{as_f32, cuda, read, write};
            let (x, y) = (as_f32(bottoms[0]), as_f32(tops[0]));
            let (dyg, mut dxg) = (y.gpu_diff()?, x.mutable_gpu_diff()?);
            let mut dx = write(&mut dxg, x.count())?;
            gpu.set(0.0, &mut dx)
                .map_err(|e| cuda("crop on the GPU", e))?;
            return walk.scatter(&gpu, "crop on the GPU", &read(&dyg, y.count())?, &mut dx);
        }
        let len = window.last().copied().unwrap_or(1);
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        dx.fill(T::ZERO);
        if dy.is_empty() {
            return Ok(());
        }
        self.rows(shape, window, |to, from| {
            dx[from..from + len].copy_from_slice(&dy[to..to + len]);
        });
        Ok(())
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom == 0
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
