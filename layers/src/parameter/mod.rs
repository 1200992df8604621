//! Caffe's Parameter: a learned blob of `parameter_param.shape` as the
//! layer's one top, with no bottom.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

/// Caffe `Parameter`: its blob (zeros until loaded or learned) is its
/// top; the top's gradient is the blob's.
pub(crate) struct ParameterLayer<T: MathElement> {
    shape: Vec<usize>,
    blobs: Vec<Blob<T>>,
}

impl<T: MathElement> ParameterLayer<T> {
    /// Reads `parameter_param.shape`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "parameter_param");
        let shape = p
            .message("shape")
            .map(|s| s.ints("dim"))
            .unwrap_or_default()
            .into_iter()
            .map(|d| {
                usize::try_from(d).map_err(|_| {
                    bad_param("set up Parameter", format!("shape dim {d} is negative"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            shape,
            blobs: Vec::new(),
        })
    }
}

impl<T: MathElement> DynLayer<T> for ParameterLayer<T> {
    fn type_name(&self) -> &str {
        "Parameter"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(0)
    }

    fn reshape(&mut self, _bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if self.blobs.is_empty() {
            self.blobs.push(Blob::new(&self.shape)?);
        }
        Ok(vec![TopShape::new(self.shape.clone())])
    }

    fn forward(&mut self, _bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Parameter", &self.blobs[0], &[("output", tops[0])])?
        {
            use crate::gpu::{as_f32, cuda, read, write};
            let n = tops[0].count();
            let (p, mut y) = (
                as_f32(&self.blobs[0]).gpu_data()?,
                as_f32(tops[0]).mutable_gpu_data()?,
            );
            return gpu
                .copy(&read(&p, n)?, &mut write(&mut y, n)?)
                .map_err(|e| cuda("Parameter on the GPU", e));
        }
        tops[0]
            .mutable_cpu_data()?
            .copy_from_slice(&self.blobs[0].cpu_data()?);
        Ok(())
    }

    /// The top's gradient added to the blob's (as parameters gather
    /// theirs).
    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        _propagate_down: &[bool],
        _bottoms: &[&Blob<T>],
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Parameter", &self.blobs[0], &[("output", tops[0])])?
        {
            use crate::gpu::{as_f32, cuda, read, write};
            let n = tops[0].count();
            let (dy, mut dp) = (
                as_f32(tops[0]).gpu_diff()?,
                as_f32(&self.blobs[0]).mutable_gpu_diff()?,
            );
            return gpu
                .axpy(1.0, &read(&dy, n)?, &mut write(&mut dp, n)?)
                .map_err(|e| cuda("Parameter on the GPU", e));
        }
        let dy = tops[0].cpu_diff()?;
        for (d, &g) in self.blobs[0].mutable_cpu_diff()?.iter_mut().zip(dy.iter()) {
            *d += g;
        }
        Ok(())
    }

    fn blobs(&self) -> &[Blob<T>] {
        &self.blobs
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut self.blobs
    }
}
