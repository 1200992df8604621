//! Caffe's Pooling layer on typed blobs: MAX or AVE over `K`x`K` windows
//! with stride `S` and Caffe's ceil rule for the output size.

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

use std::marker::PhantomData;

use blob_runtime::typed::Rank4;
use blob_runtime::{Blob, BlobError, MathElement};

use crate::layer::{Layer, Result, ensure, expect_shape};
use crate::shapes::{PoolOut, PoolShape};
mod runtime;

use cpu::PoolGeometry;
#[cfg(feature = "cuda")]
pub(crate) use cuda::POOL;
pub(crate) use runtime::PoolingLayer;

/// What a window gives (Caffe's `PoolingParameter.pool`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMethod {
    /// The window's maximum (`MAX`).
    Max,
    /// The window's mean (`AVE`).
    Ave,
}

/// Caffe `Pooling` (no padding) reading `X` = `(N, C, H, W)` and writing
/// `(N, C, ceil((H - K) / S) + 1, ...)`.
///
/// ```
/// use blob_layers::{Layer, Pooling, PoolMethod};
/// use blob_runtime::{blob, typed::TypedBlob};
/// blob!(pub shape Square = 1, 1, 2, 2);
/// let mut pool = Pooling::<f32, Square, 2, 2>::new(PoolMethod::Max);
/// let x = <blob!(f32; 1, 1, 2, 2)>::new()?;
/// x.mutable_cpu_data()?.copy_from_slice(&[1.0, 4.0, 3.0, 2.0]);
/// let y = <blob!(f32; 1, 1, 1, 1)>::new()?;
/// pool.forward(&x, &y)?;
/// assert_eq!(y.to_vec()?, vec![4.0]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct Pooling<T: MathElement, X: PoolShape<K, S>, const K: usize, const S: usize>
where
    X::Dims: Rank4,
{
    /// MAX or AVE.
    pub method: PoolMethod,
    engine: PoolEngine,
    _types: PhantomData<fn() -> (T, X)>,
}

impl<T, X, const K: usize, const S: usize> Pooling<T, X, K, S>
where
    T: MathElement,
    X: PoolShape<K, S>,
    X::Dims: Rank4,
{
    /// A pooling layer.
    ///
    /// ```
    /// use blob_layers::{Pooling, PoolMethod};
    /// blob_runtime::blob!(pub shape Maps = _, 20, 24, 24);
    /// let p = Pooling::<f32, Maps, 2, 2>::new(PoolMethod::Ave);
    /// assert_eq!(p.method, PoolMethod::Ave);
    /// ```
    pub fn new(method: PoolMethod) -> Self {
        Self {
            method,
            engine: PoolEngine::default(),
            _types: PhantomData,
        }
    }

    fn geometry(&self, x: &Blob<T>, y: &Blob<T>) -> Result<PoolGeometry> {
        let s = x.shape();
        if s.len() != 4 || s[2] < K || s[3] < K || S == 0 {
            return Err(BlobError::ShapeMismatch {
                op: "pool",
                src: x.shape_string(),
                dst: format!("(N, C, >= {K}, >= {K})"),
            });
        }
        let g = PoolGeometry {
            planes: s[0] * s[1],
            h: s[2],
            w: s[3],
            oh: PoolGeometry::output_size(s[2], K, S),
            ow: PoolGeometry::output_size(s[3], K, S),
            kernel: [K, K],
            stride: [S, S],
            pad: [0, 0],
        };
        expect_shape("write pooling output", y, &[s[0], s[1], g.oh, g.ow])?;
        Ok(g)
    }
}

impl<T, X, const K: usize, const S: usize> Layer for Pooling<T, X, K, S>
where
    T: MathElement,
    X: PoolShape<K, S>,
    X::Dims: Rank4,
{
    type Elem = T;
    type Input = X;
    type Output = PoolOut<X, K, S>;
    const TYPE: &'static str = "Pooling";

    fn forward_blobs(&mut self, x: &Blob<T>, y: &Blob<T>) -> Result<()> {
        let g = self.geometry(x, y)?;
        self.engine.forward(&g, self.method, x, y)
    }

    /// Pooling has nothing to learn: the input's diff is all it computes.
    fn backward_blobs(&mut self, x: &Blob<T>, y: &Blob<T>, propagate_down: bool) -> Result<()> {
        let g = self.geometry(x, y)?;
        if !propagate_down {
            return Ok(());
        }
        self.engine.backward(&g, self.method, x, y)
    }
}

/// The positions of a MAX pass's maxima, kept for its backward pass
/// (unless told no backward follows): what the typed [`Pooling`] and the
/// run-time [`PoolingLayer`] both run.
pub(crate) struct PoolEngine {
    argmax: Vec<u32>,
    /// Whether a MAX pass keeps its positions (not in a deploy net).
    pub keep_positions: bool,
    #[cfg(feature = "cuda")]
    gpu_argmax: blob_kernels::cuda::Scratch<u32>,
}

impl Default for PoolEngine {
    fn default() -> Self {
        Self {
            argmax: Vec::new(),
            keep_positions: true,
            #[cfg(feature = "cuda")]
            gpu_argmax: Default::default(),
        }
    }
}

impl PoolEngine {
    fn forward<T: MathElement>(
        &mut self,
        g: &PoolGeometry,
        method: PoolMethod,
        x: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("pool", x, &[("output", y)])? {
            use crate::gpu::as_f32;
            return cuda::forward(g, method, &gpu, &mut self.gpu_argmax, as_f32(x), as_f32(y));
        }
        let (xd, mut yd) = (x.cpu_data()?, y.mutable_cpu_data()?);
        match method {
            PoolMethod::Max if !self.keep_positions => {
                self.argmax.clear();
                cpu::max_values(g, &xd, &mut yd);
            }
            PoolMethod::Max => {
                ensure(&mut self.argmax, yd.len())?;
                cpu::max_forward(g, &xd, &mut yd, &mut self.argmax[..y.count()]);
            }
            PoolMethod::Ave => cpu::ave_forward(g, &xd, &mut yd),
        }
        Ok(())
    }

    fn backward<T: MathElement>(
        &self,
        g: &PoolGeometry,
        method: PoolMethod,
        x: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("pool", x, &[("output", y)])? {
            use crate::gpu::as_f32;
            return cuda::backward(g, method, &gpu, &self.gpu_argmax, as_f32(x), as_f32(y));
        }
        let (dy, mut dx) = (y.cpu_diff()?, x.mutable_cpu_diff()?);
        match method {
            PoolMethod::Max => {
                if self.argmax.len() < y.count() {
                    return Err(BlobError::CountMismatch {
                        op: "pooling backward",
                        what: "positions of the forward pass".into(),
                        got: self.argmax.len(),
                        want: y.count(),
                    });
                }
                cpu::max_backward(g, &dy, &self.argmax[..y.count()], &mut dx);
            }
            PoolMethod::Ave => cpu::ave_backward(g, &dy, &mut dx),
        }
        Ok(())
    }
}
