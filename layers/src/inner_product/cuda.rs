//! The CUDA side of InnerProduct: cuBLAS gemms, the bias kernel, and the
//! bias gradient as the output gradient's column sums.

use blob_kernels::cpu::Transpose;
use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};
use blob_kernels::sums::SumLayout;
use blob_runtime::Blob;

use crate::gpu::{cuda, int, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `inner_product.cu`: InnerProduct's bias kernels, `f32`.
    pub(crate) static INNER_PRODUCT = "inner_product.cu";
    /// `y[row, j] += bias[j]`.
    pub(crate) fn add_bias_rows_f32(total: i64, n: i32, bias: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>);
}

const OP: &str = "inner product on the GPU";

/// Which way a weight matrix is read: `(N, K)`, or `(K, N)` with Caffe's
/// `transpose: true`.
fn weights_op(transposed: bool) -> Transpose {
    if transposed {
        Transpose::No
    } else {
        Transpose::Yes
    }
}

/// `y = x W^T + b` (`x W + b` when `transposed`) for `b` rows of `k`
/// inputs and `n` outputs.
pub(crate) fn forward(
    gpu: &Gpu,
    (b, k, n): (usize, usize, usize),
    transposed: bool,
    x: &Blob<f32>,
    weight: &Blob<f32>,
    bias: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let (xg, wg, bg) = (x.gpu_data()?, weight.gpu_data()?, bias.gpu_data()?);
    let mut yg = y.mutable_gpu_data()?;
    let mut yv = write(&mut yg, b * n)?;
    gpu.gemm(
        Transpose::No,
        weights_op(transposed),
        b,
        n,
        k,
        1.0,
        &read(&xg, b * k)?,
        &read(&wg, n * k)?,
        0.0,
        &mut yv,
    )
    .map_err(|e| cuda(OP, e))?;
    // SAFETY: y holds b*n values, bias n.
    unsafe {
        add_bias_rows_f32(
            gpu,
            launch_config(b * n),
            (b * n) as i64,
            int(OP, n)?,
            &read(&bg, n)?,
            &mut yv,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// `dW += dy^T x` (`x^T dy` when `transposed`), `db += colsum(dy)`,
/// and `dx = dy W` (`dy W^T`) when asked.
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward(
    gpu: &Gpu,
    (b, k, n): (usize, usize, usize),
    transposed: bool,
    x: &Blob<f32>,
    weight: &Blob<f32>,
    bias: &Blob<f32>,
    y: &Blob<f32>,
    propagate_down: bool,
) -> Result<()> {
    let (xg, dyg) = (x.gpu_data()?, y.gpu_diff()?);
    let dy = read(&dyg, b * n)?;
    {
        let mut dwg = weight.mutable_gpu_diff()?;
        let (xv, mut dw) = (read(&xg, b * k)?, write(&mut dwg, n * k)?);
        let (t, no) = (Transpose::Yes, Transpose::No);
        if transposed {
            gpu.gemm(t, no, k, n, b, 1.0, &xv, &dy, 1.0, &mut dw)
        } else {
            gpu.gemm(t, no, n, k, b, 1.0, &dy, &xv, 1.0, &mut dw)
        }
        .map_err(|e| cuda(OP, e))?;
        let mut dbg = bias.mutable_gpu_diff()?;
        gpu.add_sums(&SumLayout::columns_of(b, n), &dy, &mut write(&mut dbg, n)?)
            .map_err(|e| cuda(OP, e))?;
    }
    if propagate_down {
        let wg = weight.gpu_data()?;
        let mut dxg = x.mutable_gpu_diff()?;
        // dx = dy W for (N, K) weights, dy W^T for (K, N) ones.
        let op = if transposed {
            Transpose::Yes
        } else {
            Transpose::No
        };
        gpu.gemm(
            Transpose::No,
            op,
            b,
            k,
            n,
            1.0,
            &dy,
            &read(&wg, n * k)?,
            0.0,
            &mut write(&mut dxg, b * k)?,
        )
        .map_err(|e| cuda(OP, e))?;
    }
    Ok(())
}
