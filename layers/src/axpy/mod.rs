//! `Axpy` of the SENet Caffe models' forks: `a * x + y` with one `a` per
//! (item, channel), the squeeze-and-excitation gate and the residual sum
//! in one layer.

#[cfg(feature = "cuda")]
mod cuda;

use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

#[cfg(feature = "cuda")]
pub(crate) use cuda::AXPY;

/// Bottoms `a` (N, C, 1, 1), `x` and `y` (N, C, H, W); top `a * x + y`.
pub(crate) struct AxpyLayer;

impl AxpyLayer {
    /// `(N * C, plane)`, with the shapes checked.
    fn dims<T: MathElement>(bottoms: &[&Blob<T>]) -> Result<(usize, usize)> {
        let (a, x, y) = (bottoms[0].shape(), bottoms[1].shape(), bottoms[2].shape());
        let gates_fit =
            x.len() >= 2 && a.len() >= 2 && a[..2] == x[..2] && a[2..].iter().all(|&d| d == 1);
        if !gates_fit || x != y {
            return Err(bad_param(
                "Axpy",
                format!(
                    "the bottoms are {}, {} and {}; Axpy needs a (N, C, 1, 1) gate and two \
                     inputs of one (N, C, ...) shape",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string(),
                    bottoms[2].shape_string()
                ),
            ));
        }
        Ok((x[0] * x[1], x[2..].iter().product()))
    }
}

#[cfg(feature = "cuda")]
impl AxpyLayer {
    /// Backward on the GPU: `da` per plane, `dx = a dy`, `dy` to `y`.
    fn backward_on<T: MathElement>(
        gpu: &blob_kernels::cuda::Gpu,
        plane: usize,
        top: &Blob<T>,
        down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        use crate::gpu::{as_f32, read, write};
        let op = "Axpy backward on the GPU";
        let n = top.count();
        let gates = bottoms[0].count();
        let dyg = as_f32(top).gpu_diff()?;
        let dy = read(&dyg, n)?;
        if down[0] {
            let x = as_f32(bottoms[1]).gpu_data()?;
            let mut da = as_f32(bottoms[0]).mutable_gpu_diff()?;
            // SAFETY: x and dy hold `gates` planes of `plane` values.
            unsafe {
                cuda::axpy_backward_a_f32(
                    gpu,
                    blob_kernels::cuda::launch_config(gates),
                    gates as i64,
                    plane as i64,
                    &read(&x, n)?,
                    &dy,
                    &mut write(&mut da, gates)?,
                )
            }
            .map_err(|e| crate::gpu::cuda(op, e))?;
        }
        if down[1] {
            let a = as_f32(bottoms[0]).gpu_data()?;
            let mut dx = as_f32(bottoms[1]).mutable_gpu_diff()?;
            // SAFETY: dy and dx hold n values, a one per plane.
            unsafe {
                cuda::axpy_backward_x_f32(
                    gpu,
                    blob_kernels::cuda::launch_config(n),
                    n as i64,
                    plane as i64,
                    &read(&a, gates)?,
                    &dy,
                    &mut write(&mut dx, n)?,
                )
            }
            .map_err(|e| crate::gpu::cuda(op, e))?;
        }
        if down[2] {
            let mut d = as_f32(bottoms[2]).mutable_gpu_diff()?;
            gpu.copy(&dy, &mut write(&mut d, n)?)
                .map_err(|e| crate::gpu::cuda(op, e))?;
        }
        Ok(())
    }
}

impl<T: MathElement> DynLayer<T> for AxpyLayer {
    fn type_name(&self) -> &str {
        "Axpy"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(3)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        Self::dims(bottoms)?;
        Ok(vec![TopShape::new(bottoms[1].shape().to_vec())])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (_, plane) = Self::dims(bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for(
            "Axpy",
            bottoms[1],
            &[
                ("gate", bottoms[0]),
                ("addend", bottoms[2]),
                ("output", tops[0]),
            ],
        )? {
            use crate::gpu::{as_f32, read, write};
            let n = bottoms[1].count();
            let (a, x, y) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(bottoms[1]).gpu_data()?,
                as_f32(bottoms[2]).gpu_data()?,
            );
            let mut out = as_f32(tops[0]).mutable_gpu_data()?;
            // SAFETY: x, y and out hold n values, a one per plane of `plane`.
            return unsafe {
                cuda::axpy_f32(
                    &gpu,
                    blob_kernels::cuda::launch_config(n),
                    n as i64,
                    plane.max(1) as i64,
                    &read(&a, bottoms[0].count())?,
                    &read(&x, n)?,
                    &read(&y, n)?,
                    &mut write(&mut out, n)?,
                )
            }
            .map_err(|e| crate::gpu::cuda("Axpy on the GPU", e));
        }
        let a = bottoms[0].cpu_data()?;
        let x = bottoms[1].cpu_data()?;
        let y = bottoms[2].cpu_data()?;
        let mut out = tops[0].mutable_cpu_data()?;
        for (((o, x), y), &a) in out
            .chunks_mut(plane.max(1))
            .zip(x.chunks(plane.max(1)))
            .zip(y.chunks(plane.max(1)))
            .zip(a.iter())
        {
            // In double, rounded once (axpy.cu computes the same).
            for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                *o = T::from_f64(a.to_f64() * x.to_f64() + y.to_f64());
            }
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        let (_, plane) = Self::dims(bottoms)?;
        let plane = plane.max(1);
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for(
            "Axpy",
            bottoms[1],
            &[
                ("gate", bottoms[0]),
                ("addend", bottoms[2]),
                ("output", tops[0]),
            ],
        )? {
            return Self::backward_on(&gpu, plane, tops[0], propagate_down, bottoms);
        }
        let dy = tops[0].cpu_diff()?;
        if propagate_down[0] {
            let x = bottoms[1].cpu_data()?;
            let mut da = bottoms[0].mutable_cpu_diff()?;
            for ((d, x), g) in da.iter_mut().zip(x.chunks(plane)).zip(dy.chunks(plane)) {
                let sum: f64 = x.iter().zip(g).map(|(x, g)| x.to_f64() * g.to_f64()).sum();
                *d = T::from_f64(sum);
            }
        }
        if propagate_down[1] {
            let a = bottoms[0].cpu_data()?;
            let mut dx = bottoms[1].mutable_cpu_diff()?;
            for ((d, g), &a) in dx.chunks_mut(plane).zip(dy.chunks(plane)).zip(a.iter()) {
                for (d, &g) in d.iter_mut().zip(g) {
                    *d = T::from_f64(a.to_f64() * g.to_f64());
                }
            }
        }
        if propagate_down[2] {
            bottoms[2].mutable_cpu_diff()?.copy_from_slice(&dy);
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
