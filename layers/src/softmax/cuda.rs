//! The CUDA side of Softmax and SoftmaxWithLoss: one thread per item. The
//! loss's per-item terms are summed in order, as on the CPU, by one GPU
//! thread, into a blob read only when the loss is asked for.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, Scratch, launch_config};
use blob_runtime::Blob;

use crate::gpu::{cuda, int, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `softmax.cu`: Softmax and SoftmaxWithLoss, `f32`.
    pub(crate) static SOFTMAX = "softmax.cu";
    /// Softmax over the classes at each position.
    pub(crate) fn softmax_rows_f32(
        positions: i64, classes: i32, inner: i64, x: &CudaView<'_, f32>, prob: &mut CudaViewMut<'_, f32>
    );
    /// Softmax gradient at each position.
    pub(crate) fn softmax_backward_f32(
        positions: i64, classes: i32, inner: i64, prob: &CudaView<'_, f32>, dprob: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
    /// Each row's cross-entropy.
    pub(crate) fn softmax_loss_rows_f32(
        rows: i64, classes: i32, prob: &CudaView<'_, f32>, labels: &CudaView<'_, f32>, losses: &mut CudaViewMut<'_, f32>
    );
    /// The mean of the rows' losses, into `loss[0]`.
    pub(crate) fn softmax_loss_mean_f32(rows: i64, losses: &CudaView<'_, f32>, loss: &mut CudaViewMut<'_, f32>);
    /// `(prob - onehot) * scale`.
    pub(crate) fn softmax_loss_backward_f32(
        total: i64, classes: i32, prob: &CudaView<'_, f32>, labels: &CudaView<'_, f32>, scale: f32,
        dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "softmax on the GPU";

/// `prob = softmax(x)` over the classes of each of `outer x inner`
/// positions.
pub(crate) fn forward(
    gpu: &Gpu,
    (outer, classes, inner): (usize, usize, usize),
    x: &Blob<f32>,
    prob: &Blob<f32>,
) -> Result<()> {
    let (xg, mut pg) = (x.gpu_data()?, prob.mutable_gpu_data()?);
    let n = outer * classes * inner;
    let positions = outer * inner;
    // SAFETY: x and prob hold outer * classes * inner values.
    unsafe {
        softmax_rows_f32(
            gpu,
            launch_config(positions),
            positions as i64,
            int(OP, classes)?,
            inner as i64,
            &read(&xg, n)?,
            &mut write(&mut pg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// `dx` from `prob` and its gradient, per position as [`forward`].
pub(crate) fn backward(
    gpu: &Gpu,
    (outer, classes, inner): (usize, usize, usize),
    x: &Blob<f32>,
    prob: &Blob<f32>,
) -> Result<()> {
    let n = outer * classes * inner;
    let positions = outer * inner;
    let (pg, dpg, mut dxg) = (prob.gpu_data()?, prob.gpu_diff()?, x.mutable_gpu_diff()?);
    // SAFETY: all three hold outer * classes * inner values.
    unsafe {
        softmax_backward_f32(
            gpu,
            launch_config(positions),
            positions as i64,
            int(OP, classes)?,
            inner as i64,
            &read(&pg, n)?,
            &read(&dpg, n)?,
            &mut write(&mut dxg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// The mean loss of `prob` against `labels` (checked class indices) into
/// `loss`'s one value, each item's term computed into `terms` (grown to
/// fit) first. Nothing is read back: the host does not wait.
pub(crate) fn loss(
    gpu: &Gpu,
    terms: &mut Scratch<f32>,
    rows: usize,
    classes: usize,
    prob: &Blob<f32>,
    labels: &Blob<f32>,
    loss: &Blob<f32>,
) -> Result<()> {
    let (pg, lg, mut out) = (
        prob.gpu_data()?,
        labels.gpu_data()?,
        loss.mutable_gpu_data()?,
    );
    let mut terms = terms.grown(gpu, rows).map_err(|e| cuda(OP, e))?;
    // SAFETY: prob holds rows * classes values, labels and terms rows.
    unsafe {
        softmax_loss_rows_f32(
            gpu,
            launch_config(rows),
            rows as i64,
            int(OP, classes)?,
            &read(&pg, rows * classes)?,
            &read(&lg, rows)?,
            &mut terms,
        )
    }
    .map_err(|e| cuda(OP, e))?;
    // SAFETY: terms holds rows values, loss one.
    unsafe {
        softmax_loss_mean_f32(
            gpu,
            launch_config(1),
            rows as i64,
            &terms.as_view(),
            &mut write(&mut out, 1)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// `(prob - onehot) scale` into the logits' diff.
pub(crate) fn loss_backward(
    gpu: &Gpu,
    rows: usize,
    classes: usize,
    prob: &Blob<f32>,
    labels: &Blob<f32>,
    logits: &Blob<f32>,
    scale: f32,
) -> Result<()> {
    let n = rows * classes;
    let (pg, lg, mut dg) = (
        prob.gpu_data()?,
        labels.gpu_data()?,
        logits.mutable_gpu_diff()?,
    );
    // SAFETY: prob and the diff hold n values, labels rows.
    unsafe {
        softmax_loss_backward_f32(
            gpu,
            launch_config(n),
            n as i64,
            int(OP, classes)?,
            &read(&pg, n)?,
            &read(&lg, rows)?,
            scale,
            &mut write(&mut dg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}
