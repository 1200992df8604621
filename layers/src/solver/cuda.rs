//! The CUDA side of the SGD solver: one kernel per parameter and step,
//! where cuBLAS took five calls (weight decay, the momentum's scal and
//! axpy, the copy into the diff, the update).

use blob_kernels::cuda::cudarc::driver::CudaViewMut;
use blob_kernels::cuda::{Gpu, launch_config};
use blob_runtime::Blob;

use crate::gpu::{cuda, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `solver.cu`: the SGD step, `f32`.
    pub(crate) static SOLVER = "solver.cu";
    /// Weight decay, momentum and update of one parameter.
    pub(crate) fn sgd_step_f32(
        n: i64, decay: f32, l1: i32, rate: f32, momentum: f32,
        data: &mut CudaViewMut<'_, f32>, diff: &mut CudaViewMut<'_, f32>,
        history: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "solver step on the GPU";

/// The step's hyper-parameters for one parameter: weight decay (with its
/// multiplier) and whether it is L1, the learning rate (with its
/// multiplier), momentum.
pub(crate) struct SgdRates {
    pub decay: f32,
    pub l1: bool,
    pub rate: f32,
    pub momentum: f32,
}

/// Caffe's `ApplyUpdate` then `Update` for `p` with momentum `history`:
/// afterwards `p`'s diff holds the step taken, as in Caffe.
pub(crate) fn step(gpu: &Gpu, rates: &SgdRates, p: &Blob<f32>, history: &Blob<f32>) -> Result<()> {
    let n = p.count();
    let mut data = p.mutable_gpu_data()?;
    let mut diff = p.mutable_gpu_diff()?;
    let mut hist = history.mutable_gpu_data()?;
    // SAFETY: data, diff and history each hold the parameter's n values.
    unsafe {
        sgd_step_f32(
            gpu,
            launch_config(n),
            n as i64,
            rates.decay,
            i32::from(rates.l1),
            rates.rate,
            rates.momentum,
            &mut write(&mut data, n)?,
            &mut write(&mut diff, n)?,
            &mut write(&mut hist, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}
