//! Caffe's Reduction: SUM, ASUM, SUMSQ or MEAN over every axis from
//! `axis` on, times `coeff`.

#[cfg(feature = "cuda")]
mod cuda;

#[cfg(feature = "cuda")]
pub(crate) use cuda::REDUCTION;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, axis_of, sub_param};
use crate::layer::Result;

/// What each reduction adds; its number is `reduction.cu`'s `op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Sum = 0,
    Asum = 1,
    Sumsq = 2,
    Mean = 3,
}

/// Caffe `Reduction`: the top keeps the axes before `axis` (a scalar for
/// axis 0), each value the reduction of its tail, scaled by `coeff`.
pub(crate) struct ReductionLayer {
    operation: Operation,
    axis: i64,
    coeff: f64,
}

impl ReductionLayer {
    /// Reads `reduction_param` (SUM over axis 0, coeff 1, by default).
    pub(crate) fn from_param(layer: &ParamMessage) -> Self {
        let p = sub_param(layer, "reduction_param");
        Self {
            operation: match p.enum_name("operation") {
                "ASUM" => Operation::Asum,
                "SUMSQ" => Operation::Sumsq,
                "MEAN" => Operation::Mean,
                _ => Operation::Sum,
            },
            axis: p.int("axis"),
            coeff: p.float("coeff"),
        }
    }

    /// The values each output reduces.
    fn dim<T: MathElement>(&self, x: &Blob<T>) -> Result<usize> {
        let a = axis_of(x, self.axis, "Reduction")?;
        Ok(x.shape()[a..].iter().product())
    }
}

impl<T: MathElement> DynLayer<T> for ReductionLayer {
    fn type_name(&self) -> &str {
        "Reduction"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let a = axis_of(bottoms[0], self.axis, "Reduction")?;
        Ok(vec![TopShape::new(bottoms[0].shape()[..a].to_vec())])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let dim = self.dim(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Reduction", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let (x, mut y) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(tops[0]).mutable_gpu_data()?,
            );
            let outputs = tops[0].count();
            let (x, mut y) = (read(&x, outputs * dim)?, write(&mut y, outputs)?);
            if dim == 0 {
                // A reduction over no values: 0, as on the CPU.
                return gpu
                    .set(0.0, &mut y)
                    .map_err(|e| crate::gpu::cuda("Reduction on the GPU", e));
            }
            let op = (self.operation as i32, self.coeff);
            return cuda::forward(&gpu, (outputs, dim), op, &x, &mut y);
        }
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        for (out, tail) in y.iter_mut().zip(x.chunks(dim.max(1))) {
            let values = tail.iter().map(|v| v.to_f64());
            let r: f64 = match self.operation {
                Operation::Sum | Operation::Mean => values.sum(),
                Operation::Asum => values.map(f64::abs).sum(),
                Operation::Sumsq => values.map(|v| v * v).sum(),
            };
            let r = if self.operation == Operation::Mean {
                r / dim.max(1) as f64
            } else {
                r
            };
            *out = T::from_f64(r * self.coeff);
        }
        // A reduction over no values: Caffe's dot of nothing, 0.
        if dim == 0 {
            y.fill(T::ZERO);
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        let dim = self.dim(bottoms[0])?;
        let scale = match self.operation {
            Operation::Mean => self.coeff / dim.max(1) as f64,
            _ => self.coeff,
        };
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Reduction", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let (x, dy, mut dx) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(tops[0]).gpu_diff()?,
                as_f32(bottoms[0]).mutable_gpu_diff()?,
            );
            let n = bottoms[0].count();
            let views = (&read(&x, n)?, &read(&dy, tops[0].count())?);
            let op = (self.operation as i32, scale);
            return cuda::backward(&gpu, (n, dim), op, views, &mut write(&mut dx, n)?);
        }
        let x = bottoms[0].to_vec()?;
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        let rows = dx.chunks_mut(dim.max(1)).zip(x.chunks(dim.max(1)));
        for ((grads, inputs), &g) in rows.zip(dy.iter()) {
            let g = g.to_f64() * scale;
            for (d, &v) in grads.iter_mut().zip(inputs) {
                let v = v.to_f64();
                *d = T::from_f64(match self.operation {
                    Operation::Sum | Operation::Mean => g,
                    // caffe_cpu_sign: 0 at 0.
                    Operation::Asum => g * f64::from(i8::from(v > 0.0) - i8::from(v < 0.0)),
                    Operation::Sumsq => 2.0 * g * v,
                });
            }
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
