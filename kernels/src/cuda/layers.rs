//! Launchers of `layers.cu`: the kernels of a LeNet-style forward pass
//! (im2col, bias scatter, max pooling, ReLU, row bias).

use cudarc::driver::{CudaView, CudaViewMut};

crate::cuda_kernels! {
    /// `layers.cu`: LeNet's forward kernels, `f32` only.
    pub static LAYERS = "layers.cu";
    /// im2col of a whole batch: `col` is `(cin*k*k) x (batch*oh*ow)`.
    pub fn im2col_batch_f32(
        total: i64, cin: i32, h: i32, w: i32, k: i32, s: i32, oh: i32, ow: i32, batch: i32,
        x: &CudaView<'_, f32>, col: &mut CudaViewMut<'_, f32>
    );
    /// `y[image, co, p] = tmp[co, image * P + p] + bias[co]`.
    pub fn scatter_bias_f32(
        total: i64, cout: i32, batch: i32, p: i32,
        tmp: &CudaView<'_, f32>, bias: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// Max pooling without padding, first maximum wins.
    pub fn maxpool_f32(
        total: i64, h: i32, w: i32, oh: i32, ow: i32, k: i32, s: i32,
        x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// `y = max(y, 0)` in place.
    pub fn relu_f32(n: i64, y: &mut CudaViewMut<'_, f32>);
    /// `y[row, j] += bias[j]` for a `(rows, n)` matrix.
    pub fn add_bias_rows_f32(total: i64, n: i32, bias: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>);
}
