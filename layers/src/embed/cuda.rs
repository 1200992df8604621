//! The CUDA side of Embed: `embed.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};

use crate::gpu::cuda;
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `embed.cu`: Embed's rows and their gradients, `f32`.
    pub(crate) static EMBED = "embed.cu";
    /// Each of the `n` outputs: its index's row of the weights, plus the
    /// bias where `has_bias`.
    pub(crate) fn embed_forward_f32(
        n: i64, outputs: i64, index: &CudaView<'_, f32>, weight: &CudaView<'_, f32>,
        bias: &CudaView<'_, f32>, has_bias: i32, y: &mut CudaViewMut<'_, f32>
    );
    /// `dW[index[i]] += dy[i]` for the `count` indices, by column.
    pub(crate) fn embed_weight_backward_f32(
        outputs: i64, count: i64, index: &CudaView<'_, f32>, dy: &CudaView<'_, f32>,
        dweight: &mut CudaViewMut<'_, f32>
    );
    /// `db += dy[i]` for the `count` rows of `dy`, by column.
    pub(crate) fn embed_bias_backward_f32(
        outputs: i64, count: i64, dy: &CudaView<'_, f32>, dbias: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "Embed on the GPU";

/// The forward pass: `count` indices, each a row of `outputs` values.
pub(crate) fn forward(
    gpu: &Gpu,
    (count, outputs): (usize, usize),
    (index, weight, bias): (
        &CudaView<'_, f32>,
        &CudaView<'_, f32>,
        Option<&CudaView<'_, f32>>,
    ),
    y: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let n = count * outputs;
    if n == 0 {
        return Ok(());
    }
    // The kernel reads no bias without one: the weights stand in.
    let (bias, has_bias) = bias.map_or((weight, 0), |b| (b, 1));
    // SAFETY: index holds count checked rows of weight (rows x outputs),
    // bias outputs values where has_bias, y count x outputs.
    unsafe {
        embed_forward_f32(
            gpu,
            launch_config(n),
            n as i64,
            outputs as i64,
            index,
            weight,
            bias,
            has_bias,
            y,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// The weights' gradient, and the bias' where there is one.
pub(crate) fn backward(
    gpu: &Gpu,
    (count, outputs): (usize, usize),
    (index, dy): (&CudaView<'_, f32>, &CudaView<'_, f32>),
    dweight: &mut CudaViewMut<'_, f32>,
    dbias: Option<&mut CudaViewMut<'_, f32>>,
) -> Result<()> {
    if count * outputs == 0 {
        return Ok(());
    }
    let (o, c) = (outputs as i64, count as i64);
    // SAFETY: index holds count checked rows of dweight (rows x outputs),
    // dy count x outputs values, dbias outputs.
    unsafe {
        embed_weight_backward_f32(gpu, launch_config(outputs), o, c, index, dy, dweight)
            .map_err(|e| cuda(OP, e))?;
        if let Some(dbias) = dbias {
            embed_bias_backward_f32(gpu, launch_config(outputs), o, c, dy, dbias)
                .map_err(|e| cuda(OP, e))?;
        }
    }
    Ok(())
}
