//! Caffe's InnerProduct layer: `y = x W^T + b` (or `x W + b` with
//! `transpose: true`), with `x` flattened to `(B, K)`.

#[cfg(feature = "cuda")]
mod cuda;

use blob_kernels::cpu::{self, Transpose};
use blob_runtime::{Blob, MathElement};

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
    ones: Vec<T>,
    /// Whether to keep `W^T` beside `W`: in a net whose backward pass
    /// never runs, whose weights stay as they are between passes. Where
    /// a solver changes them every step, making the copy anew cost a
    /// LeNet training step 10%.
    pub transposes: bool,
    /// `W^T` (`k x n`) and the weights' write stamp it was made from: a
    /// gemm reads it in place, where it would pack (gather) `W`'s columns
    /// on every pass (LeNet's ip1 at batch 64: 0.90 -> 0.74 ms).
    transposed_weights: Option<(u64, Vec<T>)>,
}

/// The largest weights kept transposed beside themselves (4 MiB of
/// `f32`): LeNet's and MTCNN's. A larger copy costs more memory than its
/// packing costs time (CaffeNet's fc6 is 151 MB), and at large batches the
/// gemm repays its packing anyway.
const TRANSPOSED_COPY_MAX: usize = 1 << 20;

/// From this many rows a gemm repays packing `W`'s columns itself.
const TRANSPOSED_COPY_MAX_ROWS: usize = 256;

impl<T: MathElement> InnerProductEngine<T> {
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
        } else if m == 1 {
            // One item: a matrix-vector product, which a gemm would pack
            // the whole weight matrix for.
            cpu::gemv(
                Transpose::No,
                n,
                k,
                T::ONE,
                &w,
                &x.cpu_data()?,
                T::ZERO,
                &mut yd[..n],
            );
        } else if n * k <= TRANSPOSED_COPY_MAX && m <= TRANSPOSED_COPY_MAX_ROWS && self.transposes {
            let wt = self.transposed(weight.data().write_stamp(), &w, (k, n))?;
            cpu::gemm(
                Transpose::No,
                Transpose::No,
                m,
                n,
                k,
                T::ONE,
                &x.cpu_data()?,
                wt,
                T::ZERO,
                &mut yd,
            );
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

    /// `W^T` for weights `w` (`n x k`) of write stamp `stamp`, made anew
    /// only when the weights were written since.
    fn transposed(&mut self, stamp: u64, w: &[T], (k, n): (usize, usize)) -> Result<&[T]> {
        let fresh =
            matches!(&self.transposed_weights, Some((s, t)) if *s == stamp && t.len() == k * n);
        if !fresh {
            let (_, t) = self
                .transposed_weights
                .get_or_insert_with(|| (stamp, Vec::new()));
            if t.len() != k * n {
                t.clear();
                ensure(t, k * n)?;
            }
            // In 32 x 32 blocks: the block's rows and columns both stay
            // in L1 (a row-by-row copy misses on every write).
            const BLOCK: usize = 32;
            for j0 in (0..n).step_by(BLOCK) {
                for p0 in (0..k).step_by(BLOCK) {
                    for j in j0..(j0 + BLOCK).min(n) {
                        for p in p0..(p0 + BLOCK).min(k) {
                            t[p * n + j] = w[j * k + p];
                        }
                    }
                }
            }
            self.transposed_weights.as_mut().expect("just set").0 = stamp;
        }
        Ok(&self.transposed_weights.as_ref().expect("made above").1[..k * n])
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
        if propagate_down {
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
