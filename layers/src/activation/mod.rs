//! Caffe's element-wise activations ReLU, Sigmoid and TanH. Each runs in
//! place (bottom and top the same blob, as Caffe nets run ReLU) or from
//! one blob into another of the same shape.

#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use std::marker::PhantomData;

use blob_kernels::cpu;
use blob_runtime::{Blob, MathElement};

use crate::layer::{Result, expect_shape, in_place};
#[cfg(feature = "cuda")]
pub(crate) use cuda::ACTIVATION;

/// An element-wise function and its derivative, written in terms of the
/// output `y = f(x)` (all three of Caffe's can be).
pub(crate) trait Activate {
    /// Caffe's layer type name.
    const TYPE: &'static str;
    /// `f(x)`.
    fn apply<T: MathElement>(x: T) -> T;
    /// `f'(x)` from `x` and `y = f(x)`.
    fn slope<T: MathElement>(x: T, y: T) -> T;
}

/// `max(x, 0)` (Caffe `ReLU`, `negative_slope` 0).
pub(crate) struct Rectify;
impl Activate for Rectify {
    const TYPE: &'static str = "ReLU";
    /// Caffe's own sum, `std::max(x, 0) + 0 * std::min(x, 0)`, not a
    /// comparison: NaN stays NaN and -inf becomes NaN (`0 * -inf`), so a
    /// layer that diverged is not hidden by the ReLU after it; -0 stays
    /// -0 and other negatives give +0, Caffe's bits.
    fn apply<T: MathElement>(x: T) -> T {
        let high = if x < T::ZERO { T::ZERO } else { x };
        let low = if T::ZERO < x { T::ZERO } else { x };
        high + T::ZERO * low
    }
    fn slope<T: MathElement>(x: T, _y: T) -> T {
        if x > T::ZERO { T::ONE } else { T::ZERO }
    }
}

/// `1 / (1 + e^-x)` (Caffe `Sigmoid`).
pub(crate) struct Logistic;
impl Activate for Logistic {
    const TYPE: &'static str = "Sigmoid";
    fn apply<T: MathElement>(x: T) -> T {
        T::ONE / (T::ONE + (-x).exp())
    }
    fn slope<T: MathElement>(_x: T, y: T) -> T {
        y * (T::ONE - y)
    }
}

/// `tanh(x)` (Caffe `TanH`).
pub(crate) struct Hyperbolic;
impl Activate for Hyperbolic {
    const TYPE: &'static str = "TanH";
    fn apply<T: MathElement>(x: T) -> T {
        T::from_f64(x.to_f64().tanh())
    }
    fn slope<T: MathElement>(_x: T, y: T) -> T {
        T::ONE - y * y
    }
}

/// `y = f(x)`, in place or not, on the device `x` lives on.
pub(crate) fn forward<F: Activate, T: MathElement>(x: &Blob<T>, y: &Blob<T>) -> Result<()> {
    if !in_place(x, y) {
        expect_shape("write activation output", y, x.shape())?;
    }
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::gpu::gpu_for(F::TYPE, x, &[("output", y)])? {
        use crate::gpu::as_f32;
        return cuda::forward(F::TYPE, &gpu, as_f32(x), as_f32(y));
    }
    if in_place(x, y) {
        cpu::map_in_place(&mut y.mutable_cpu_data()?, F::apply);
        return Ok(());
    }
    cpu::map(&x.cpu_data()?, &mut y.mutable_cpu_data()?, F::apply);
    Ok(())
}

/// `dx = dy * f'(x)`. In place, `x` is already `f(x)`; the slope of all
/// three follows from the output alone, and ReLU's sign is the same.
pub(crate) fn backward<F: Activate, T: MathElement>(x: &Blob<T>, y: &Blob<T>) -> Result<()> {
    if !in_place(x, y) {
        expect_shape("activation backward", y, x.shape())?;
    }
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::gpu::gpu_for(F::TYPE, x, &[("output", y)])? {
        use crate::gpu::as_f32;
        return cuda::backward(F::TYPE, &gpu, as_f32(x), as_f32(y));
    }
    let yd = y.cpu_data()?;
    if in_place(x, y) {
        for (d, &out) in y.mutable_cpu_diff()?.iter_mut().zip(yd.iter()) {
            *d = times_slope(*d, F::slope(out, out));
        }
        return Ok(());
    }
    let (xd, dy) = (x.cpu_data()?, y.cpu_diff()?);
    let mut dx = x.mutable_cpu_diff()?;
    for (((d, &g), &input), &out) in dx.iter_mut().zip(dy.iter()).zip(xd.iter()).zip(yd.iter()) {
        *d = times_slope(g, F::slope(input, out));
    }
    Ok(())
}

/// `gradient * slope`, with a zero slope giving +0 whatever the gradient's
/// sign (Caffe's ReLU writes `top_diff * (bottom > 0)`, never -0).
fn times_slope<T: MathElement>(gradient: T, slope: T) -> T {
    if slope == T::ZERO {
        T::ZERO
    } else {
        gradient * slope
    }
}

/// Caffe's `ReLU` (negative_slope 0), `Sigmoid` and `TanH` as run-time
/// layers, in place or not.
pub(crate) struct ActivationLayer<F: Activate> {
    _f: PhantomData<fn() -> F>,
}

impl<F: Activate> ActivationLayer<F> {
    pub(crate) fn new() -> Self {
        Self { _f: PhantomData }
    }
}

impl<T: MathElement, F: Activate> crate::dyn_layer::DynLayer<T> for ActivationLayer<F> {
    fn type_name(&self) -> &str {
        F::TYPE
    }

    fn activation(&self) -> Option<crate::Activation> {
        (F::TYPE == Rectify::TYPE).then_some(crate::Activation::Relu)
    }

    fn reshape(
        &mut self,
        bottoms: &[&Blob<T>],
        _tops: &[&Blob<T>],
    ) -> Result<Vec<crate::dyn_layer::TopShape>> {
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        forward::<F, T>(bottoms[0], tops[0])
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        backward::<F, T>(bottoms[0], tops[0])
    }
}
