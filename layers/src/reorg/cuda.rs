//! The CUDA side of Reorg: `reorg.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};

blob_kernels::cuda_kernels! {
    /// `reorg.cu`: Reorg's moves, `f32`.
    pub(crate) static REORG = "reorg.cu";
    /// Over each position `p` of the input's `channels x height x width`
    /// items and its darknet pair `q`: `to[p] = from[q]` where `gather`,
    /// else `to[q] = from[p]`.
    pub(crate) fn reorg_f32(
        n: i64, channels: i64, height: i64, width: i64, stride: i64, gather: i32,
        from: &CudaView<'_, f32>, to: &mut CudaViewMut<'_, f32>
    );
}
