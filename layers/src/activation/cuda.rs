//! The CUDA side of the activations: one kernel per pass, the function
//! chosen by Caffe's layer type.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};
use blob_runtime::Blob;

use crate::gpu::{cuda, read, write};
use crate::layer::{Result, in_place};

blob_kernels::cuda_kernels! {
    /// `activation.cu`: ReLU, Sigmoid and TanH, `f32`.
    pub(crate) static ACTIVATION = "activation.cu";
    /// `y = f(x)`.
    pub(crate) fn activate_f32(n: i64, kind: i32, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>);
    /// `y = f(y)`.
    pub(crate) fn activate_inplace_f32(n: i64, kind: i32, y: &mut CudaViewMut<'_, f32>);
    /// `dx = dy * f'(x)`.
    pub(crate) fn activate_backward_f32(
        n: i64, kind: i32, x: &CudaView<'_, f32>, y: &CudaView<'_, f32>,
        dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
    /// `d = d * f'` from the output, in place.
    pub(crate) fn activate_backward_inplace_f32(n: i64, kind: i32, y: &CudaView<'_, f32>, d: &mut CudaViewMut<'_, f32>);
}

const OP: &str = "activation on the GPU";

/// The kernels' number for a Caffe layer type.
fn kind(layer_type: &str) -> i32 {
    match layer_type {
        "ReLU" => 0,
        "Sigmoid" => 1,
        _ => 2,
    }
}

pub(crate) fn forward(layer_type: &str, gpu: &Gpu, x: &Blob<f32>, y: &Blob<f32>) -> Result<()> {
    let (n, k) = (y.count(), kind(layer_type));
    let config = launch_config(n);
    if in_place(x, y) {
        let mut yg = y.mutable_gpu_data()?;
        // SAFETY: y holds n values.
        return unsafe { activate_inplace_f32(gpu, config, n as i64, k, &mut write(&mut yg, n)?) }
            .map_err(|e| cuda(OP, e));
    }
    let (xg, mut yg) = (x.gpu_data()?, y.mutable_gpu_data()?);
    // SAFETY: x and y hold n values (shapes checked by the caller).
    unsafe {
        activate_f32(
            gpu,
            config,
            n as i64,
            k,
            &read(&xg, n)?,
            &mut write(&mut yg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

pub(crate) fn backward(layer_type: &str, gpu: &Gpu, x: &Blob<f32>, y: &Blob<f32>) -> Result<()> {
    let (n, k) = (y.count(), kind(layer_type));
    let config = launch_config(n);
    let yg = y.gpu_data()?;
    if in_place(x, y) {
        let mut dg = y.mutable_gpu_diff()?;
        // SAFETY: y's data and diff hold n values each.
        return unsafe {
            activate_backward_inplace_f32(
                gpu,
                config,
                n as i64,
                k,
                &read(&yg, n)?,
                &mut write(&mut dg, n)?,
            )
        }
        .map_err(|e| cuda(OP, e));
    }
    let (xg, dyg, mut dxg) = (x.gpu_data()?, y.gpu_diff()?, x.mutable_gpu_diff()?);
    // SAFETY: all four hold n values.
    unsafe {
        activate_backward_f32(
            gpu,
            config,
            n as i64,
            k,
            &read(&xg, n)?,
            &read(&yg, n)?,
            &read(&dyg, n)?,
            &mut write(&mut dxg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}
