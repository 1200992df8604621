//! The CUDA side of BatchReindex: `batch_reindex.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};

use crate::gpu::cuda;
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `batch_reindex.cu`: BatchReindex's items and their gradients, `f32`.
    pub(crate) static BATCH_REINDEX = "batch_reindex.cu";
    /// Each of the `n` outputs: its item's index's item of `x`.
    pub(crate) fn batch_reindex_forward_f32(
        n: i64, inner: i64, index: &CudaView<'_, f32>, x: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>
    );
    /// `dx = 0`, then `dx[index[o]] += dy[o]` for the `picks` items, in order.
    pub(crate) fn batch_reindex_backward_f32(
        inner: i64, items: i64, picks: i64, index: &CudaView<'_, f32>, dy: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "BatchReindex on the GPU";

/// The forward pass: `picks` items of `inner` values.
pub(crate) fn forward(
    gpu: &Gpu,
    (picks, inner): (usize, usize),
    (index, x): (&CudaView<'_, f32>, &CudaView<'_, f32>),
    y: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let n = picks * inner;
    if n == 0 {
        return Ok(());
    }
    // SAFETY: index holds picks checked item numbers of x, y picks x inner.
    unsafe { batch_reindex_forward_f32(gpu, launch_config(n), n as i64, inner as i64, index, x, y) }
        .map_err(|e| cuda(OP, e))
}

/// The backward pass into the `items` input items' gradients.
pub(crate) fn backward(
    gpu: &Gpu,
    (items, picks, inner): (usize, usize, usize),
    (index, dy): (&CudaView<'_, f32>, &CudaView<'_, f32>),
    dx: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    if inner == 0 || items == 0 {
        return Ok(());
    }
    let (i, n, p) = (inner as i64, items as i64, picks as i64);
    // SAFETY: index holds picks checked item numbers of dx (items x
    // inner), dy picks x inner values.
    unsafe { batch_reindex_backward_f32(gpu, launch_config(inner), i, n, p, index, dy, dx) }
        .map_err(|e| cuda(OP, e))
}
