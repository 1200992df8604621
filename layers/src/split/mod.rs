//! Caffe's Split, which a net inserts where one blob feeds several
//! layers: each top views the bottom's data, and backward sums the tops'
//! gradients into the bottom's.

use blob_kernels::cpu;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, Sharing, TopShape};
use crate::layer::Result;

/// Caffe `Split`: one bottom, any number of tops, never in place.
pub(crate) struct SplitLayer;

impl<T: MathElement> DynLayer<T> for SplitLayer {
    fn type_name(&self) -> &str {
        "Split"
    }

    fn tops(&self) -> Arity {
        Arity::at_least(1)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let dims = bottoms[0].shape().to_vec();
        Ok(tops
            .iter()
            .map(|_| TopShape::sharing(dims.clone(), 0, Sharing::Data))
            .collect())
    }

    /// The tops already view the bottom's data.
    fn forward(&mut self, _bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<()> {
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
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_of_all(&[bottoms, tops].concat()) {
            return gpu_backward(&gpu, tops, bottoms[0]);
        }
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        dx.fill(T::ZERO);
        for top in tops {
            cpu::axpy(T::ONE, &top.cpu_diff()?, &mut dx);
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}

/// The bottom's gradient as the sum of the tops' on the GPU: the first
/// copied, the others added in order (the CPU side's sum, from zero, to
/// the bit).
#[cfg(feature = "cuda")]
fn gpu_backward<T: MathElement>(
    gpu: &blob_kernels::cuda::Gpu,
    tops: &[&Blob<T>],
    bottom: &Blob<T>,
) -> Result<()> {
    use crate::gpu::{as_f32, cuda, read, write};
    let n = bottom.count();
    let mut dxg = as_f32(bottom).mutable_gpu_diff()?;
    let mut dx = write(&mut dxg, n)?;
    let fail = |e| cuda("split on the GPU", e);
    let Some((first, rest)) = tops.split_first() else {
        return gpu.set(0.0, &mut dx).map_err(fail);
    };
    gpu.copy(&read(&as_f32(*first).gpu_diff()?, n)?, &mut dx)
        .map_err(fail)?;
    for top in rest {
        gpu.axpy(1.0, &read(&as_f32(*top).gpu_diff()?, n)?, &mut dx)
            .map_err(fail)?;
    }
    Ok(())
}
