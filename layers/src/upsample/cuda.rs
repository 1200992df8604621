//! The CUDA side of Upsample: `upsample.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};

blob_kernels::cuda_kernels! {
    /// `upsample.cu`: YOLO's repetition and SegNet's unpooling, `f32`.
    pub(crate) static UPSAMPLE = "upsample.cu";
    /// Each output from its input `(r / sh, q / sw)`.
    pub(crate) fn upsample_nearest_f32(
        n: i64, h: i64, w: i64, sh: i32, sw: i32, x: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>
    );
    /// Each input's block of gradients summed.
    pub(crate) fn upsample_nearest_backward_f32(
        n: i64, h: i64, w: i64, sh: i32, sw: i32, dy: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
    /// Each input put at its mask's position.
    pub(crate) fn unpool_f32(
        n: i64, plane_in: i64, plane_out: i64, x: &CudaView<'_, f32>, mask: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>
    );
    /// Each input's gradient from its mask's position.
    pub(crate) fn unpool_backward_f32(
        n: i64, plane_in: i64, plane_out: i64, dy: &CudaView<'_, f32>, mask: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
    /// Zeros.
    pub(crate) fn upsample_zero_f32(n: i64, y: &mut CudaViewMut<'_, f32>);
}
