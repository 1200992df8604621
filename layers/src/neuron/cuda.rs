//! The CUDA side of the element-wise layers with parameters: one kernel a
//! pass, in double as the CPU side computes, in place or not.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};
use blob_runtime::Blob;

use crate::gpu::{cuda, read, write};
use crate::layer::{Result, in_place};

blob_kernels::cuda_kernels! {
    /// `neuron.cu`: AbsVal, Power, ELU, BNLL, Exp, Log, Threshold, Clip
    /// and leaky ReLU, `f32`.
    pub(crate) static NEURON = "neuron.cu";
    /// `y = f(x)`.
    pub(crate) fn neuron_f32(
        n: i64, kind: i32, a: f64, b: f64, c: f64, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// `y = f(y)`.
    pub(crate) fn neuron_inplace_f32(n: i64, kind: i32, a: f64, b: f64, c: f64, y: &mut CudaViewMut<'_, f32>);
    /// `dx = dy f'(x)`.
    pub(crate) fn neuron_grad_f32(
        n: i64, kind: i32, a: f64, b: f64, c: f64, x: &CudaView<'_, f32>, y: &CudaView<'_, f32>,
        dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
    /// `d = d f'` from the output, in place.
    pub(crate) fn neuron_grad_inplace_f32(
        n: i64, kind: i32, a: f64, b: f64, c: f64, y: &CudaView<'_, f32>, d: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "element-wise layer on the GPU";

/// A function as the kernels take it: its kind and parameters.
pub(crate) type Kind = (i32, [f64; 3]);

pub(crate) fn forward(
    gpu: &Gpu,
    (kind, [a, b, c]): Kind,
    x: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let n = y.count();
    let config = launch_config(n);
    if in_place(x, y) {
        let mut yg = y.mutable_gpu_data()?;
        // SAFETY: y holds n values.
        return unsafe {
            neuron_inplace_f32(
                gpu,
                config,
                n as i64,
                kind,
                a,
                b,
                c,
                &mut write(&mut yg, n)?,
            )
        }
        .map_err(|e| cuda(OP, e));
    }
    let (xg, mut yg) = (x.gpu_data()?, y.mutable_gpu_data()?);
    // SAFETY: x and y hold n values (the layer's shapes).
    unsafe {
        neuron_f32(
            gpu,
            config,
            n as i64,
            kind,
            a,
            b,
            c,
            &read(&xg, n)?,
            &mut write(&mut yg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}

pub(crate) fn backward(
    gpu: &Gpu,
    (kind, [a, b, c]): Kind,
    x: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let n = y.count();
    let config = launch_config(n);
    let yg = y.gpu_data()?;
    if in_place(x, y) {
        let mut dg = y.mutable_gpu_diff()?;
        // SAFETY: y and its diff hold n values.
        return unsafe {
            neuron_grad_inplace_f32(
                gpu,
                config,
                n as i64,
                kind,
                a,
                b,
                c,
                &read(&yg, n)?,
                &mut write(&mut dg, n)?,
            )
        }
        .map_err(|e| cuda(OP, e));
    }
    let (xg, dyg, mut dxg) = (x.gpu_data()?, y.gpu_diff()?, x.mutable_gpu_diff()?);
    // SAFETY: every view holds n values.
    unsafe {
        neuron_grad_f32(
            gpu,
            config,
            n as i64,
            kind,
            a,
            b,
            c,
            &read(&xg, n)?,
            &read(&yg, n)?,
            &read(&dyg, n)?,
            &mut write(&mut dxg, n)?,
        )
    }
    .map_err(|e| cuda(OP, e))
}
