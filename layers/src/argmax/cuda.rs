//! The CUDA side of ArgMax (Caffe ranks on the host only): one thread per
//! ranked run, so a segmentation net's per-pixel ArgMax over its classes
//! reads its scores where they are, and only the labels move.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};
use blob_runtime::Blob;

use super::Ranking;
use crate::gpu::{cuda, int, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `argmax.cu`: ArgMax, `f32`.
    pub(crate) static ARGMAX = "argmax.cu";
    /// Each run's `top_k` indices (or values).
    pub(crate) fn argmax_f32(
        runs: i64, span: i32, inner: i64, top_k: i32, out_max_val: i32, along_axis: i32,
        x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "ArgMax on the GPU";

/// `y` from `x` ranked as `r` says.
pub(crate) fn forward(gpu: &Gpu, r: Ranking, x: &Blob<f32>, y: &Blob<f32>) -> Result<()> {
    let runs = r.items * r.inner;
    let (xg, mut yg) = (x.gpu_data()?, y.mutable_gpu_data()?);
    // SAFETY: x holds items * span * inner values; y the top's count,
    // which reshape sized for items * top_k * inner (or items * width).
    unsafe {
        argmax_f32(
            gpu,
            launch_config(runs),
            runs as i64,
            int(OP, r.span)?,
            r.inner as i64,
            int(OP, r.top_k)?,
            i32::from(r.out_max_val),
            i32::from(r.along_axis),
            &read(&xg, x.count())?,
            &mut write(&mut yg, y.count())?,
        )
    }
    .map_err(|e| cuda(OP, e))
}
