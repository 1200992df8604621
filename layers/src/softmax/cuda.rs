//! The CUDA side of Softmax and SoftmaxWithLoss: one thread per position.
//! The loss's per-position terms (weighted by SegNet's class weights,
//! zero at an ignored label) are summed in order, as on the CPU, by one
//! GPU thread, into a blob read only when the loss is asked for.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{CudaError, Gpu, Scratch, launch_config};
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
    /// Each position's cross-entropy times its class's weight, 0 where
    /// its label is ignored.
    pub(crate) fn softmax_loss_terms_f32(
        positions: i64, classes: i32, inner: i64, prob: &CudaView<'_, f32>, labels: &CudaView<'_, f32>,
        has_ignore: i32, ignore: i64, weights: &CudaView<'_, f32>, terms: &mut CudaViewMut<'_, f32>
    );
    /// The terms' sum over the divisor, into `loss[0]`.
    pub(crate) fn softmax_loss_sum_f32(positions: i64, terms: &CudaView<'_, f32>, divisor: f32, loss: &mut CudaViewMut<'_, f32>);
    /// `(prob - onehot) * weight * scale`, 0 at ignored positions.
    pub(crate) fn softmax_loss_backward_f32(
        total: i64, classes: i32, inner: i64, prob: &CudaView<'_, f32>, labels: &CudaView<'_, f32>,
        has_ignore: i32, ignore: i64, weights: &CudaView<'_, f32>, scale: f32, dx: &mut CudaViewMut<'_, f32>
    );
}

/// SegNet's class weights on the device (all 1 without them), uploaded
/// again only when they change: a warm training step makes no upload or
/// allocation for them.
#[derive(Default)]
pub(crate) struct DeviceClassWeights {
    /// What the buffer holds.
    uploaded: Vec<f32>,
    buffer: Scratch<f32>,
}

impl DeviceClassWeights {
    /// The weights of `classes` classes (`None`: 1 each) on `gpu`.
    pub(crate) fn get(
        &mut self,
        gpu: &Gpu,
        weights: Option<&[f32]>,
        classes: usize,
    ) -> Result<CudaView<'_, f32>> {
        let current = self.uploaded.len() == classes
            && self.buffer.len() >= classes
            && match weights {
                Some(w) => self.uploaded == w,
                None => self.uploaded.iter().all(|&v| v == 1.0),
            };
        if !current {
            self.uploaded = weights.map_or_else(|| vec![1.0; classes], <[f32]>::to_vec);
            let mut buffer = self.buffer.grown(gpu, classes).map_err(|e| cuda(OP, e))?;
            gpu.stream()
                .memcpy_htod(&self.uploaded, &mut buffer)
                .map_err(|e| cuda(OP, CudaError::driver("upload the class weights")(e)))?;
        }
        Ok(self
            .buffer
            .view(classes)
            .expect("the buffer holds the classes' weights: grown above or before"))
    }
}

/// `(has_ignore, ignore)` as the kernels take Caffe's `ignore_label`.
fn ignored(ignore: Option<i64>) -> (i32, i64) {
    (i32::from(ignore.is_some()), ignore.unwrap_or(0))
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

/// The loss of `prob` (`(outer, classes, inner)`) against `labels`
/// (checked class indices or the ignored label) over `divisor` into
/// `loss`'s one value, each position's term computed into `terms` (grown
/// to fit) first. Nothing is read back: the host does not wait.
#[allow(clippy::too_many_arguments)]
pub(crate) fn loss(
    gpu: &Gpu,
    scratch: &mut Scratch<f32>,
    (outer, classes, inner): (usize, usize, usize),
    (ignore, weights): (Option<i64>, &CudaView<'_, f32>),
    divisor: f32,
    prob: &Blob<f32>,
    labels: &Blob<f32>,
    loss: &Blob<f32>,
) -> Result<()> {
    let positions = outer * inner;
    let (has_ignore, ignore) = ignored(ignore);
    let (pg, lg, mut out) = (
        prob.gpu_data()?,
        labels.gpu_data()?,
        loss.mutable_gpu_data()?,
    );
    let mut terms = scratch.grown(gpu, positions).map_err(|e| cuda(OP, e))?;
    // SAFETY: prob holds outer * classes * inner values, labels and terms
    // one a position, weights one a class (every label indexes one).
    unsafe {
        softmax_loss_terms_f32(
            gpu,
            launch_config(positions),
            positions as i64,
            int(OP, classes)?,
            inner as i64,
            &read(&pg, positions * classes)?,
            &read(&lg, positions)?,
            has_ignore,
            ignore,
            weights,
            &mut terms,
        )
    }
    .map_err(|e| cuda(OP, e))?;
    // SAFETY: terms holds a value a position, loss one.
    unsafe {
        softmax_loss_sum_f32(
            gpu,
            launch_config(1),
            positions as i64,
            &terms.as_view(),
            divisor,
            &mut write(&mut out, 1)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// `(prob - onehot) weight scale` into the logits' diff, 0 at ignored
/// positions.
#[allow(clippy::too_many_arguments)]
pub(crate) fn loss_backward(
    gpu: &Gpu,
    (outer, classes, inner): (usize, usize, usize),
    (ignore, weights): (Option<i64>, &CudaView<'_, f32>),
    scale: f32,
    prob: &Blob<f32>,
    labels: &Blob<f32>,
    logits: &Blob<f32>,
) -> Result<()> {
    let n = outer * classes * inner;
    let (has_ignore, ignore) = ignored(ignore);
    let (pg, lg, mut dg) = (
        prob.gpu_data()?,
        labels.gpu_data()?,
        logits.mutable_gpu_diff()?,
    );
    // SAFETY: prob and the diff hold n values, labels one a position,
    // weights one a class (every label indexes one).
    unsafe {
        softmax_loss_backward_f32(
            gpu,
            launch_config(n),
            n as i64,
            int(OP, classes)?,
            inner as i64,
            &read(&pg, n)?,
            &read(&lg, outer * inner)?,
            has_ignore,
            ignore,
            weights,
            scale,
            &mut write(&mut dg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}
