//! The CUDA side of the BN forks' layer with fixed statistics: `bn.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};

blob_kernels::cuda_kernels! {
    /// `bn.cu`: BN's forward pass with fixed statistics, `f32`.
    pub(crate) static BN = "bn.cu";
    /// `y = (x - mean) / sqrt(var + eps) slope + bias`, or `x slope + bias`.
    pub(crate) fn bn_forward_f32(
        n: i64, channels: i64, plane: i64, x: &CudaView<'_, f32>, slope: &CudaView<'_, f32>,
        bias: &CudaView<'_, f32>, mean: &CudaView<'_, f32>, var: &CudaView<'_, f32>, eps: f64,
        has_stats: i32, y: &mut CudaViewMut<'_, f32>
    );
}
