//! Caffe's InnerProduct layer: `y = x W^T + b` (or `x W + b` with
//! `transpose: true`), with `x` flattened to `(B, K)`.

#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use blob_kernels::cpu::{self, AlignedVec, Transpose};
use blob_runtime::{Blob, MathElement};

use crate::f32_view::as_f32;
use crate::layer::{Result, ensure};
#[cfg(feature = "cuda")]
pub(crate) use cuda::INNER_PRODUCT;
pub(crate) use runtime::InnerProductLayer;

mod runtime;

/// The passes of an inner product over `(M, K)` inputs, `(N, K)` weights
/// (`(K, N)` when `transposed`, Caffe's `transpose: true`) and `(N)`
/// bias, on the device the blobs live on.
#[derive(Default)]
pub(crate) struct InnerProductEngine<T> {
    ones: AlignedVec<T>,
    /// A product written transposed, before it is turned into its blob.
    turned: AlignedVec<T>,
}

/// Whether an `f32` product with `m` batch rows is run with the weights
/// as its first operand, read where they lie, and the batch packed (then
/// its result transposed): the batch fills the gemm kernel's panels (a
/// multiple of their 32 columns) and the weights are deep and at least
/// four times the batch's side, so packing them, as the other
/// orientation does, costs more than turning the result. LeNet's ip1 at
/// batch 64 (`blobflow time`, one core, four alternating runs): forward
/// 0.647-0.669 -> 0.565-0.614 ms, backward 1.13-1.18 -> 1.09-1.16 ms.
fn weights_lead<T: 'static>(m: usize, n: usize, k: usize) -> bool {
    as_f32::<T>(&[]).is_some()
        && m > 0
        && m.is_multiple_of(cpu::PANEL_COLUMNS)
        && n >= 4 * m
        && k >= 256
}

impl<T: MathElement> InnerProductEngine<T> {
    /// `out = (op(w) b^T)^T` for `op(w)` of `rows x depth` (the weights,
    /// as stored or transposed) and `b` of `cols x depth` (the batch):
    /// the product with the weights first, turned into `out`'s `cols x
    /// rows` through `self.turned` (see [`weights_lead`]).
    fn turned_product(
        &mut self,
        (trans_w, (rows, cols, depth), w, b): (Transpose, (usize, usize, usize), &[T], &[T]),
        out: &mut [T],
    ) -> Result<()> {
        ensure(&mut self.turned, rows * cols)?;
        let turned = &mut self.turned[..rows * cols];
        cpu::gemm(
            trans_w,
            Transpose::Yes,
            rows,
            cols,
            depth,
            T::ONE,
            w,
            b,
            T::ZERO,
            turned,
        );
        cpu::transpose(turned, [rows, cols], out);
        Ok(())
    }

    /// `y = x W^T + b` for `(m, k, n)` (`x W + b` transposed).
    pub(crate) fn forward(
        &mut self,
        (m, k, n): (usize, usize, usize),
        transposed: bool,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for_learned("inner product", x, y, weight, bias)? {
            use crate::gpu::as_f32;
            let (w, bias) = (as_f32(weight), as_f32(bias));
            return cuda::forward(&gpu, (m, k, n), transposed, as_f32(x), w, bias, as_f32(y));
        }
        let mut yd = y.mutable_cpu_data()?;
        let w = weight.cpu_data()?;
        if transposed {
            cpu::gemm(
                Transpose::No,
                Transpose::No,
                m,
                n,
                k,
                T::ONE,
                &x.cpu_data()?,
                &w,
                T::ZERO,
                &mut yd,
            );
        } else if weights_lead::<T>(m, n, k) {
            // y^T = W x^T, then turned.
            let product = (Transpose::No, (n, m, k), &*w, &*x.cpu_data()?);
            self.turned_product(product, &mut yd)?;
        } else {
            cpu::gemm(
                Transpose::No,
                Transpose::Yes,
                m,
                n,
                k,
                T::ONE,
                &x.cpu_data()?,
                &w,
                T::ZERO,
                &mut yd,
            );
        }
        let bias = bias.cpu_data()?;
        for row in yd.chunks_exact_mut(n) {
            cpu::add_inplace(row, &bias);
        }
        Ok(())
    }

    /// Accumulates `dW += dy^T x` and `db += sum(dy)`, and writes
    /// `dx = dy W` when `propagate_down`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn backward(
        &mut self,
        (m, k, n): (usize, usize, usize),
        transposed: bool,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: &Blob<T>,
        y: &Blob<T>,
        propagate_down: bool,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for_learned("inner product", x, y, weight, bias)? {
            use crate::gpu::as_f32;
            let (w, bias) = (as_f32(weight), as_f32(bias));
            return cuda::backward(
                &gpu,
                (m, k, n),
                transposed,
                as_f32(x),
                w,
                bias,
                as_f32(y),
                propagate_down,
            );
        }
        let dy = y.cpu_diff()?;
        let mut dw = weight.mutable_cpu_diff()?;
        if transposed {
            // dW (K, N) += x^T dy.
            cpu::gemm(
                Transpose::Yes,
                Transpose::No,
                k,
                n,
                m,
                T::ONE,
                &x.cpu_data()?,
                &dy,
                T::ONE,
                &mut dw,
            );
        } else {
            cpu::gemm(
                Transpose::Yes,
                Transpose::No,
                n,
                k,
                m,
                T::ONE,
                &dy,
                &x.cpu_data()?,
                T::ONE,
                &mut dw,
            );
        }
        ensure(&mut self.ones, m)?;
        self.ones[..m].fill(T::ONE);
        let mut db = bias.mutable_cpu_diff()?;
        cpu::gemv(
            Transpose::Yes,
            m,
            n,
            T::ONE,
            &dy,
            &self.ones[..m],
            T::ONE,
            &mut db,
        );
        if propagate_down && !transposed && weights_lead::<T>(m, k, n) {
            // dx^T = W^T dy^T, then turned.
            let product = (Transpose::Yes, (k, m, n), &*weight.cpu_data()?, &*dy);
            self.turned_product(product, &mut x.mutable_cpu_diff()?)?;
        } else if propagate_down {
            let w = weight.cpu_data()?;
            let trans_w = if transposed {
                Transpose::Yes
            } else {
                Transpose::No
            };
            cpu::gemm(
                Transpose::No,
                trans_w,
                m,
                k,
                n,
                T::ONE,
                &dy,
                &w,
                T::ZERO,
                &mut x.mutable_cpu_diff()?,
            );
        }
        Ok(())
    }
}
