//! The element-wise activations a layer's pass can apply as it writes
//! its output: a net folds the in-place activation layer after a
//! Convolution into the convolution's pass over its output, as the
//! inference engines fold them, and the values are the layer's bits.

use blob_runtime::{Blob, MathElement};

use crate::activation::{Activate, Rectify};
use crate::dyn_layer::DynLayer;
use crate::layer::Result;

/// An activation a layer's pass can apply as it writes its tops
/// ([`DynLayer::forward_then`]), and the in-place layer that a net folds
/// into the layer before it: Caffe's `ReLU` (with or without a
/// `negative_slope`) and the MobileNet forks' `ReLU6`.
///
/// ```
/// use blob_layers::Activation;
/// assert_eq!(Activation::Relu.apply(-2.0f32), 0.0);
/// assert_eq!(Activation::LeakyRelu { negative_slope: 0.1 }.apply(-2.0f32), -0.2);
/// assert_eq!(Activation::Relu6.apply(7.5f32), 6.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Activation {
    /// Caffe's `ReLU` of `negative_slope` 0, Caffe's own sum
    /// `max(x, 0) + 0 * min(x, 0)`.
    Relu,
    /// Caffe's `ReLU` with a `negative_slope`: `x` above 0, else the
    /// slope times `x` (the product in double).
    LeakyRelu {
        /// `relu_param { negative_slope }`.
        negative_slope: f64,
    },
    /// The MobileNet forks' `ReLU6`: `x` clamped to `[0, 6]`, NaN kept.
    Relu6,
}

/// The forks' `std::min(std::max(x, 0), 6)` in the blob's type: NaN stays.
#[inline(always)]
pub(crate) fn relu6<T: MathElement>(v: T) -> T {
    let six = T::from_f64(6.0);
    if v < T::ZERO {
        T::ZERO
    } else if v > six {
        six
    } else {
        v
    }
}

/// Caffe's leaky ReLU, its one product in double.
#[inline(always)]
pub(crate) fn leaky<T: MathElement>(negative_slope: f64, v: T) -> T {
    if v > T::ZERO {
        v
    } else {
        T::from_f64(negative_slope * v.to_f64())
    }
}

impl Activation {
    /// The activation of one value: the bits its layer gives.
    #[inline(always)]
    pub fn apply<T: MathElement>(self, v: T) -> T {
        match self {
            Self::Relu => Rectify::apply(v),
            Self::LeakyRelu { negative_slope } => leaky(negative_slope, v),
            Self::Relu6 => relu6(v),
        }
    }

    /// Runs the activation's layer over `top` in place, on whichever
    /// device it lives: what a pass that cannot apply it as it writes
    /// (a GPU's, a 3-D convolution's) does after.
    pub(crate) fn run_in_place<T: MathElement>(self, top: &Blob<T>) -> Result<()> {
        match self {
            Self::Relu => crate::activation::forward::<Rectify, T>(top, top),
            Self::LeakyRelu { negative_slope } => {
                crate::neuron::NeuronLayer::leaky_relu(negative_slope).forward(&[top], &[top])
            }
            Self::Relu6 => crate::neuron::NeuronLayer::relu6().forward(&[top], &[top]),
        }
    }
}
