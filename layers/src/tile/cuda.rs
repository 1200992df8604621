//! The CUDA side of Tile: `tile.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};

use crate::gpu::cuda;
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `tile.cu`: Tile's copies and their gradients, `f32`.
    pub(crate) static TILE = "tile.cu";
    /// `y[p] = x[p / (inner tiles) inner + p mod inner]` for the `n` outputs.
    pub(crate) fn tile_forward_f32(
        n: i64, inner: i64, tiles: i64, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// Each of the `n` inputs' gradient: its copies' summed in order.
    pub(crate) fn tile_backward_f32(
        n: i64, inner: i64, tiles: i64, dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
}

/// Tile's forward (`backward: false`, `from` the input, `to` the output)
/// or backward (`from` the output's gradient) over `outer` blocks of
/// `inner` values.
pub(crate) fn tile_on(
    gpu: &Gpu,
    (outer, inner, tiles): (usize, usize, usize),
    backward: bool,
    from: &CudaView<'_, f32>,
    to: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let n = if backward {
        outer * inner
    } else {
        outer * inner * tiles
    };
    if n == 0 {
        return Ok(());
    }
    let (i, t) = (inner as i64, tiles as i64);
    // SAFETY: `from` and `to` hold the outer x inner input values and the
    // outer x tiles x inner output values the kernels index.
    unsafe {
        if backward {
            tile_backward_f32(gpu, launch_config(n), n as i64, i, t, from, to)
        } else {
            tile_forward_f32(gpu, launch_config(n), n as i64, i, t, from, to)
        }
    }
    .map_err(|e| cuda("Tile on the GPU", e))
}
