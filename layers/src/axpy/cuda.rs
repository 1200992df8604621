//! The CUDA side of Axpy: `axpy.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};

blob_kernels::cuda_kernels! {
    /// `axpy.cu`: Axpy's passes, `f32`.
    pub(crate) static AXPY = "axpy.cu";
    /// `out = a x + y`.
    pub(crate) fn axpy_f32(
        n: i64, plane: i64, a: &CudaView<'_, f32>, x: &CudaView<'_, f32>,
        y: &CudaView<'_, f32>, out: &mut CudaViewMut<'_, f32>
    );
    /// `dx = a dy`.
    pub(crate) fn axpy_backward_x_f32(
        n: i64, plane: i64, a: &CudaView<'_, f32>, dy: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
    /// `da = sum x dy` over each plane.
    pub(crate) fn axpy_backward_a_f32(
        gates: i64, plane: i64, x: &CudaView<'_, f32>, dy: &CudaView<'_, f32>,
        da: &mut CudaViewMut<'_, f32>
    );
}
