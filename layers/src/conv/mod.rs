//! Caffe's Convolution layer on typed blobs: square kernel `K`, stride
//! `S`, padding `P`, one group; the output shape follows from the input's
//! at compile time.

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "cudnn")]
mod cudnn;
mod depthwise;

use std::marker::PhantomData;

use blob_runtime::typed::{D, Dim, Rank4, Shape, TypedBlob};
use blob_runtime::{Blob, BlobError, MathElement};

use crate::layer::{Layer, Result, expect_shape};
use crate::shapes::{ConvOut, ConvShape};
mod engine;
mod runtime;
mod volume;
mod winograd;

pub(crate) use cpu::{ConvGeometry, ConvGradients};
#[cfg(feature = "cuda")]
pub(crate) use cuda::CONV;
pub(crate) use engine::ConvEngine;
use engine::EngineChoice;
pub(crate) use runtime::{ConvParam, ConvolutionLayer, Plan, planar_size};
pub(crate) use volume::VolumeGeometry;

/// How a [`Convolution`] convolves on a GPU in this build on this
/// machine, in words: `"cuDNN 9.21.0"`, or `"im2col + cuBLAS"` and why
/// cuDNN is not used (a layer with `use_cudnn` off takes im2col too).
///
/// ```
/// let path = blob_layers::gpu_convolution_path();
/// assert!(path.starts_with("cuDNN") || path.starts_with("im2col + cuBLAS ("));
/// ```
#[cfg(feature = "cuda")]
pub fn gpu_convolution_path() -> String {
    match blob_kernels::cuda::cudnn() {
        Ok(version) => format!("cuDNN {version}"),
        Err(why) => format!("im2col + cuBLAS ({why})"),
    }
}

/// The weights' dims `(COUT, CIN, K, K)` for input `X`.
pub type ConvWeights<X, const COUT: usize, const K: usize> =
    (D<COUT>, <<X as Shape>::Dims as Rank4>::A1, D<K>, D<K>);

/// Caffe `Convolution` reading `X` = `(N, CIN, H, W)` and writing
/// `(N, COUT, (H + 2P - K) / S + 1, ...)`, with weights
/// `(COUT, CIN, K, K)` and a bias of `COUT`.
///
/// ```
/// use blob_layers::{Convolution, Layer};
/// use blob_runtime::{blob, typed::TypedBlob};
/// blob!(pub shape Image = _, 1, 4, 4);
/// blob!(pub shape Features = _, 2, 2, 2);
/// let mut conv = Convolution::<f32, Image, 2, 3>::new()?;
/// conv.weight.mutable_cpu_data()?.fill(1.0);
/// let x = TypedBlob::<f32, Image>::with_dynamic(1)?;
/// x.mutable_cpu_data()?.fill(1.0);
/// let y = TypedBlob::<f32, Features>::with_dynamic(1)?;
/// conv.forward(&x, &y)?;
/// assert_eq!(y.to_vec()?, vec![9.0; 8]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct Convolution<
    T: MathElement,
    X: ConvShape<COUT, K, S, P>,
    const COUT: usize,
    const K: usize,
    const S: usize = 1,
    const P: usize = 0,
> where
    X::Dims: Rank4,
{
    /// Weights `(COUT, CIN, K, K)` (Caffe `blobs_[0]`).
    pub weight: TypedBlob<T, ConvWeights<X, COUT, K>>,
    /// Bias `(COUT)` (Caffe `blobs_[1]`).
    pub bias: TypedBlob<T, (D<COUT>,)>,
    engine: ConvEngine<T>,
    /// Whether to convolve with cuDNN on a GPU when it loads (feature
    /// `cudnn`; Caffe's `engine: CUDNN`); im2col + cuBLAS otherwise.
    #[cfg(feature = "cudnn")]
    pub use_cudnn: bool,
    /// Whether cuDNN may convolve this f32 layer on TF32 tensor cores
    /// (Ampere and later GPUs): faster, with inputs rounded to a 10-bit
    /// mantissa (about 1e-3 relative off f32). Off by default, so the GPU
    /// matches the CPU within 1e-5; on is what Caffe (cuDNN's default
    /// math) and PyTorch (`torch.backends.cudnn.allow_tf32`) do.
    ///
    /// ```
    /// blob_runtime::blob!(pub shape Digits = _, 1, 28, 28);
    /// let mut conv = blob_layers::Convolution::<f32, Digits, 20, 5>::new()?;
    /// assert!(!conv.allow_tf32);
    /// conv.allow_tf32 = true; // takes effect on the GPU's next pass
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    #[cfg(feature = "cudnn")]
    pub allow_tf32: bool,
    _input: PhantomData<fn() -> X>,
}

impl<T, X, const COUT: usize, const K: usize, const S: usize, const P: usize>
    Convolution<T, X, COUT, K, S, P>
where
    T: MathElement,
    X: ConvShape<COUT, K, S, P>,
    X::Dims: Rank4,
{
    /// A convolution with zero-filled weights and bias.
    ///
    /// ```
    /// use blob_runtime::blob;
    /// blob!(pub shape Digits = _, 1, 28, 28);
    /// let c = blob_layers::Convolution::<f32, Digits, 20, 5>::new()?;
    /// assert_eq!(c.weight.shape(), &[20, 1, 5, 5]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn new() -> Result<Self> {
        let cin = <<X::Dims as Rank4>::A1 as Dim>::STATIC.ok_or(BlobError::ShapeMismatch {
            op: "make a convolution",
            src: X::describe(),
            dst: "(N, C, H, W) with a static C".into(),
        })?;
        Ok(Self {
            weight: TypedBlob::from_shape(&[COUT, cin, K, K])?,
            bias: TypedBlob::from_shape(&[COUT])?,
            engine: ConvEngine::default(),
            #[cfg(feature = "cudnn")]
            use_cudnn: true,
            #[cfg(feature = "cudnn")]
            allow_tf32: false,
            _input: PhantomData,
        })
    }

    fn engine_choice(&self) -> EngineChoice {
        EngineChoice {
            winograd: true,
            #[cfg(feature = "cudnn")]
            use_cudnn: self.use_cudnn,
            #[cfg(feature = "cudnn")]
            allow_tf32: self.allow_tf32,
        }
    }

    /// The geometry for a run-time input and output, checked against the
    /// weights.
    fn geometry(&self, x: &Blob<T>, y: &Blob<T>) -> Result<ConvGeometry> {
        let cin = self.weight.shape()[1];
        let s = x.shape();
        if s.len() != 4 || s[1] != cin || s[2] + 2 * P < K || s[3] + 2 * P < K {
            return Err(BlobError::ShapeMismatch {
                op: "convolve",
                src: x.shape_string(),
                dst: {
                    let least = K.saturating_sub(2 * P);
                    format!("(N, {cin}, >= {least}, >= {least})")
                },
            });
        }
        let g = ConvGeometry {
            batch: s[0],
            channels_in: cin,
            channels_out: COUT,
            h: s[2],
            w: s[3],
            oh: ConvGeometry::output_size(s[2], K, S, P, 1),
            ow: ConvGeometry::output_size(s[3], K, S, P, 1),
            kernel: [K; 2],
            stride: [S; 2],
            pad: [P; 2],
            dilation: [1; 2],
        };
        expect_shape("write convolution output", y, &[g.batch, COUT, g.oh, g.ow])?;
        Ok(g)
    }
}

impl<T, X, const COUT: usize, const K: usize, const S: usize, const P: usize> Layer
    for Convolution<T, X, COUT, K, S, P>
where
    T: MathElement,
    X: ConvShape<COUT, K, S, P>,
    X::Dims: Rank4,
{
    type Elem = T;
    type Input = X;
    type Output = ConvOut<X, COUT, K, S, P>;
    const TYPE: &'static str = "Convolution";

    /// `y = conv(x) + bias` (Caffe `Forward_cpu`, or `Forward_gpu` when
    /// `x` lives on a CUDA device).
    fn forward_blobs(&mut self, x: &Blob<T>, y: &Blob<T>) -> Result<()> {
        let g = self.geometry(x, y)?;
        let choice = self.engine_choice();
        self.engine
            .forward(&g, choice, x, &self.weight, &self.bias, y)
    }

    /// Weight and bias gradients from `y`'s diff, and `x`'s diff when
    /// `propagate_down` (Caffe `Backward_cpu`).
    fn backward_blobs(&mut self, x: &Blob<T>, y: &Blob<T>, propagate_down: bool) -> Result<()> {
        let g = self.geometry(x, y)?;
        let choice = self.engine_choice();
        self.engine
            .backward(&g, choice, x, &self.weight, &self.bias, y, propagate_down)
    }

    fn params(&self) -> Vec<&Blob<T>> {
        vec![self.weight.as_dyn(), self.bias.as_dyn()]
    }
}
