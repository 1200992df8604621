//! The CUDA side of ShuffleChannel: `shuffle_channel.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};

blob_kernels::cuda_kernels! {
    /// `shuffle_channel.cu`: ShuffleChannel's moves, `f32`.
    pub(crate) static SHUFFLE_CHANNEL = "shuffle_channel.cu";
    /// `y[item, out] = x[item, source(out)]`.
    pub(crate) fn shuffle_channel_f32(
        n: i64, channels: i64, group: i64, plane: i64, x: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>
    );
    /// `dx[item, source(out)] = dy[item, out]`.
    pub(crate) fn unshuffle_channel_f32(
        n: i64, channels: i64, group: i64, plane: i64, dy: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
}
