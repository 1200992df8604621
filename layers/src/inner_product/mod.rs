//! Caffe's InnerProduct layer on typed blobs (`transpose: false`):
//! `y = x W^T + b`, with `x` flattened to `(B, K)`.

#[cfg(feature = "cuda")]
mod cuda;

use std::marker::PhantomData;

use blob_kernels::cpu::{self, Transpose};
use blob_runtime::typed::{D, Dim, TypedBlob};
use blob_runtime::{Blob, BlobError, MathElement};

use crate::layer::{Layer, Result, ensure};
use crate::shapes::{InnerProductInput, InnerProductOut};
#[cfg(feature = "cuda")]
pub(crate) use cuda::INNER_PRODUCT;
pub(crate) use runtime::InnerProductLayer;

mod runtime;

/// Caffe `InnerProduct` reading `X` = `(B, ...)` (flattened to `(B, K)`)
/// and writing `(B, N)`, with weights `(N, K)` and a bias of `N`.
///
/// ```
/// use blob_layers::{InnerProduct, Layer};
/// use blob_runtime::blob;
/// blob!(pub shape Features = 1, 3);
/// let mut ip = InnerProduct::<f32, Features, 2>::new()?;
/// ip.weight.mutable_cpu_data()?.copy_from_slice(&[1.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
/// let x = <blob!(f32; 1, 3)>::new()?;
/// x.mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0, 3.0]);
/// let y = <blob!(f32; 1, 2)>::new()?;
/// ip.forward(&x, &y)?;
/// assert_eq!(y.to_vec()?, vec![1.0, 5.0]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct InnerProduct<T: MathElement, X: InnerProductInput, const N: usize> {
    /// Weights `(N, K)` (Caffe `blobs_[0]`).
    pub weight: TypedBlob<T, (D<N>, X::K)>,
    /// Bias `(N)` (Caffe `blobs_[1]`).
    pub bias: TypedBlob<T, (D<N>,)>,
    engine: InnerProductEngine<T>,
    _input: PhantomData<fn() -> X>,
}

impl<T: MathElement, X: InnerProductInput, const N: usize> InnerProduct<T, X, N> {
    /// An inner product with zero-filled weights and bias.
    ///
    /// ```
    /// use blob_runtime::blob;
    /// blob!(pub shape Pooled = _, 50, 4, 4);
    /// let ip = blob_layers::InnerProduct::<f32, Pooled, 500>::new()?;
    /// assert_eq!(ip.weight.shape(), &[500, 800]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn new() -> Result<Self> {
        let k = <X::K as Dim>::STATIC.expect("InnerProductInput's K is a product of static dims");
        Ok(Self {
            weight: TypedBlob::from_shape(&[N, k])?,
            bias: TypedBlob::from_shape(&[N])?,
            engine: InnerProductEngine::default(),
            _input: PhantomData,
        })
    }

    fn dims(&self, x: &Blob<T>, y: &Blob<T>) -> Result<(usize, usize)> {
        let k = self.weight.shape()[1];
        let b = x.shape().first().copied().unwrap_or(0);
        if x.count() != b * k || y.shape() != [b, N] {
            return Err(BlobError::ShapeMismatch {
                op: "inner product",
                src: format!("{} -> {}", x.shape_string(), y.shape_string()),
                dst: format!("(B, {k}) -> (B, {N})"),
            });
        }
        Ok((b, k))
    }
}

impl<T: MathElement, X: InnerProductInput, const N: usize> Layer for InnerProduct<T, X, N> {
    type Elem = T;
    type Input = X;
    type Output = InnerProductOut<X, N>;
    const TYPE: &'static str = "InnerProduct";

    /// `y = x W^T + b`: one gemm, then the bias.
    fn forward_blobs(&mut self, x: &Blob<T>, y: &Blob<T>) -> Result<()> {
        let (b, k) = self.dims(x, y)?;
        self.engine
            .forward((b, k, N), false, x, &self.weight, &self.bias, y)
    }

    /// Accumulates `dW += dy^T x` and `db += sum(dy)`, and writes
    /// `dx = dy W` when `propagate_down`.
    fn backward_blobs(&mut self, x: &Blob<T>, y: &Blob<T>, propagate_down: bool) -> Result<()> {
        let (b, k) = self.dims(x, y)?;
        self.engine.backward(
            (b, k, N),
            false,
            x,
            &self.weight,
            &self.bias,
            y,
            propagate_down,
        )
    }

    fn params(&self) -> Vec<&Blob<T>> {
        vec![self.weight.as_dyn(), self.bias.as_dyn()]
    }
}

/// The passes of an inner product over `(M, K)` inputs, `(N, K)` weights
/// (`(K, N)` when `transposed`, Caffe's `transpose: true`) and `(N)`
/// bias, on the device the blobs live on: what the typed
/// [`InnerProduct`] and the run-time [`InnerProductLayer`] both run.
#[derive(Default)]
pub(crate) struct InnerProductEngine<T> {
    ones: Vec<T>,
}

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
