//! The CUDA side of BatchNorm's forward pass with global statistics (a
//! deploy net's); batch statistics and the backward pass run on the
//! host.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};
use blob_runtime::Blob;

use crate::gpu::{cuda, int, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `batch_norm.cu`: BatchNorm with global statistics, `f32`.
    pub(crate) static BATCH_NORM = "batch_norm.cu";
    /// `y = (x - mean) / std` per channel.
    pub(crate) fn batch_norm_global_f32(
        n: i64, channels: i32, spatial: i64, x: &CudaView<'_, f32>, stats: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>
    );
    /// The same in place.
    pub(crate) fn batch_norm_global_inplace_f32(
        n: i64, channels: i32, spatial: i64, stats: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "BatchNorm on the GPU";

/// `y = (x - mean) / std`, `stats` holding the means then the
/// deviations; `x` is `None` in place.
pub(crate) fn forward(
    gpu: &Gpu,
    (channels, spatial): (usize, usize),
    x: Option<&Blob<f32>>,
    stats: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let n = y.count();
    let cfg = launch_config(n);
    let c = int(OP, channels)?;
    let sg = stats.gpu_data()?;
    let s = read(&sg, 2 * channels)?;
    let mut yg = y.mutable_gpu_data()?;
    let mut yv = write(&mut yg, n)?;
    match x {
        Some(x) => {
            let xg = x.gpu_data()?;
            // SAFETY: x and y hold n values, stats 2 * channels.
            unsafe {
                batch_norm_global_f32(
                    gpu,
                    cfg,
                    n as i64,
                    c,
                    spatial as i64,
                    &read(&xg, n)?,
                    &s,
                    &mut yv,
                )
            }
        }
        // SAFETY: y holds n values, stats 2 * channels.
        None => unsafe {
            batch_norm_global_inplace_f32(gpu, cfg, n as i64, c, spatial as i64, &s, &mut yv)
        },
    }
    .map_err(|e| cuda(OP, e))
}
