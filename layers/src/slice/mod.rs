//! Caffe's Slice: one bottom cut along an axis into several tops, the
//! inverse of Concat; on the GPU where the blobs live there.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::concat::{AxisChoice, around, legacy_axis, slabs_of};
use crate::dyn_layer::{Arity, DynLayer, Sharing, TopShape, bad_param, sub_param};
use crate::layer::Result;

/// Caffe `Slice`.
pub(crate) struct SliceLayer {
    axis: AxisChoice,
    points: Vec<usize>,
}

impl SliceLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "slice_param");
        Ok(Self {
            axis: legacy_axis(&p, "slice_dim", "set up Slice")?,
            points: p
                .uints("slice_point")
                .into_iter()
                .map(|v| v as usize)
                .collect(),
        })
    }

    /// Each top's size along the axis.
    fn sizes(&self, dim: usize, tops: usize) -> Result<Vec<usize>> {
        if self.points.is_empty() {
            if tops == 0 || !dim.is_multiple_of(tops) {
                return Err(bad_param(
                    "slice",
                    format!(
                        "Number of top blobs ({tops}) should evenly divide input slice axis ({dim})"
                    ),
                ));
            }
            return Ok(vec![dim / tops; tops]);
        }
        if self.points.len() + 1 != tops {
            return Err(bad_param(
                "slice",
                format!(
                    "{} slice points give {} tops, the layer has {tops}",
                    self.points.len(),
                    self.points.len() + 1
                ),
            ));
        }
        let mut sizes = Vec::with_capacity(tops);
        let mut prev = 0;
        for &p in &self.points {
            if p <= prev || p >= dim {
                return Err(bad_param(
                    "slice",
                    format!(
                        "slice points {:?} must increase strictly from above 0 and stay below the axis size {dim}",
                        self.points
                    ),
                ));
            }
            sizes.push(p - prev);
            prev = p;
        }
        sizes.push(dim - prev);
        Ok(sizes)
    }
}

impl<T: MathElement> DynLayer<T> for SliceLayer {
    fn type_name(&self) -> &str {
        "Slice"
    }

    fn tops(&self) -> Arity {
        Arity::at_least(1)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let x = bottoms[0];
        let axis = self.axis.of(x, "slice")?;
        let sizes = self.sizes(x.shape()[axis], tops.len())?;
        Ok(sizes
            .iter()
            .map(|&s| {
                let mut dims = x.shape().to_vec();
                dims[axis] = s;
                if tops.len() == 1 {
                    TopShape::sharing(dims, 0, Sharing::DataAndDiff)
                } else {
                    TopShape::new(dims)
                }
            })
            .collect())
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        if tops.len() == 1 {
            return Ok(());
        }
        let axis = self.axis.of(bottoms[0], "slice")?;
        let (outer, inner) = around(bottoms[0], axis);
        let total = bottoms[0].shape()[axis];
        let parts = slabs_of(tops, axis, outer, inner, total);
        #[cfg(feature = "cuda")]
        if let Some(gpu) =
            crate::gpu::gpu_for("slice", bottoms[0], &crate::concat::others(bottoms, tops))?
        {
            use crate::gpu::{as_f32, read, write};
            let x = as_f32(bottoms[0]);
            let xg = x.gpu_data()?;
            let xv = read(&xg, x.count())?;
            for (top, slabs) in tops.iter().zip(&parts) {
                let mut yg = as_f32(top).mutable_gpu_data()?;
                slabs.split_on(&gpu, &xv, &mut write(&mut yg, top.count())?)?;
            }
            return Ok(());
        }
        let x = bottoms[0].cpu_data()?;
        for (top, slabs) in tops.iter().zip(&parts) {
            slabs.split(&x, &mut top.mutable_cpu_data()?);
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if tops.len() == 1 || !propagate_down[0] {
            return Ok(());
        }
        let axis = self.axis.of(bottoms[0], "slice")?;
        let (outer, inner) = around(bottoms[0], axis);
        let total = bottoms[0].shape()[axis];
        let parts = slabs_of(tops, axis, outer, inner, total);
        #[cfg(feature = "cuda")]
        if let Some(gpu) =
            crate::gpu::gpu_for("slice", bottoms[0], &crate::concat::others(bottoms, tops))?
        {
            use crate::gpu::{as_f32, read, write};
            let x = as_f32(bottoms[0]);
            let mut dxg = x.mutable_gpu_diff()?;
            let mut dx = write(&mut dxg, x.count())?;
            for (top, slabs) in tops.iter().zip(&parts) {
                let dyg = as_f32(top).gpu_diff()?;
                slabs.join_on(&gpu, &read(&dyg, top.count())?, &mut dx)?;
            }
            return Ok(());
        }
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        for (top, slabs) in tops.iter().zip(&parts) {
            slabs.join(&top.cpu_diff()?, &mut dx);
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
