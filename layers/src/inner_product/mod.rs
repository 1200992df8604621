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
    ones: Vec<T>,
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
            ones: Vec::new(),
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
        #[cfg(feature = "cuda")]
        if let Some(gpu) =
            crate::gpu::gpu_for_learned("inner product", x, y, &self.weight, &self.bias)?
        {
            use crate::gpu::as_f32;
            let (w, bias) = (as_f32(self.weight.as_dyn()), as_f32(self.bias.as_dyn()));
            return cuda::forward(&gpu, (b, k, N), as_f32(x), w, bias, as_f32(y));
        }
        let mut yd = y.mutable_cpu_data()?;
        let w = self.weight.cpu_data()?;
        cpu::gemm(
            Transpose::No,
            Transpose::Yes,
            b,
            N,
            k,
            T::ONE,
            &x.cpu_data()?,
            &w,
            T::ZERO,
            &mut yd,
        );
        let bias = self.bias.cpu_data()?;
        for row in yd.chunks_exact_mut(N) {
            cpu::add_inplace(row, &bias);
        }
        Ok(())
    }

    /// Accumulates `dW += dy^T x` and `db += sum(dy)`, and writes
    /// `dx = dy W` when `propagate_down`.
    fn backward_blobs(&mut self, x: &Blob<T>, y: &Blob<T>, propagate_down: bool) -> Result<()> {
        let (b, k) = self.dims(x, y)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) =
            crate::gpu::gpu_for_learned("inner product", x, y, &self.weight, &self.bias)?
        {
            use crate::gpu::as_f32;
            let (w, bias) = (as_f32(self.weight.as_dyn()), as_f32(self.bias.as_dyn()));
            return cuda::backward(
                &gpu,
                (b, k, N),
                as_f32(x),
                w,
                bias,
                as_f32(y),
                propagate_down,
            );
        }
        let dy = y.cpu_diff()?;
        let mut dw = self.weight.mutable_cpu_diff()?;
        cpu::gemm(
            Transpose::Yes,
            Transpose::No,
            N,
            k,
            b,
            T::ONE,
            &dy,
            &x.cpu_data()?,
            T::ONE,
            &mut dw,
        );
        ensure(&mut self.ones, b);
        self.ones[..b].fill(T::ONE);
        let mut db = self.bias.mutable_cpu_diff()?;
        cpu::gemv(
            Transpose::Yes,
            b,
            N,
            T::ONE,
            &dy,
            &self.ones[..b],
            T::ONE,
            &mut db,
        );
        if propagate_down {
            let w = self.weight.cpu_data()?;
            cpu::gemm(
                Transpose::No,
                Transpose::No,
                b,
                k,
                N,
                T::ONE,
                &dy,
                &w,
                T::ZERO,
                &mut x.mutable_cpu_diff()?,
            );
        }
        Ok(())
    }

    fn params(&self) -> Vec<&Blob<T>> {
        vec![self.weight.as_dyn(), self.bias.as_dyn()]
    }
}
