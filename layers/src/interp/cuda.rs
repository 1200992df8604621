//! The CUDA side of Interp's forward pass: `interp.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};

blob_kernels::cuda_kernels! {
    /// `interp.cu`: Interp's bilinear forward pass, `f32`.
    pub(crate) static INTERP = "interp.cu";
    /// Each output from its two rows and columns.
    pub(crate) fn interp_f32(
        n: i64, full_h: i64, full_w: i64, crop: i64, h: i64, w: i64, oh: i64, ow: i64,
        x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
}
