//! What a kernel does to each output as it stores it: a convolution's
//! bias (Caffe's `forward_cpu_bias`) and the rectifier a net folds into
//! the layer (Caffe's `ReLU`, the MobileNet forks' `ReLU6`), so the
//! output is written once rather than written and then passed over.

#[cfg(target_arch = "x86_64")]
use super::lanes::Lanes;

/// The rectifier applied after the bias: none, Caffe's `ReLU` (with
/// `negative_slope` 0, [`relu`]'s bits) or `ReLU6` (`min(max(x, 0), 6)`,
/// NaN kept).
///
/// ```
/// use blob_kernels::cpu::Rectifier;
/// assert_eq!(Rectifier::Relu6.apply(7.5), 6.0);
/// assert_eq!(Rectifier::Relu.apply(-1.0), 0.0);
/// assert_eq!(Rectifier::None.apply(-1.0), -1.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rectifier {
    /// The value as it is.
    None,
    /// Caffe's `ReLU`: [`relu`].
    Relu,
    /// The forks' `ReLU6`: `std::min(std::max(x, 0), 6)`, NaN kept.
    Relu6,
}

impl Rectifier {
    /// One value rectified: the bits the layer gives.
    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Rectifier::None => x,
            Rectifier::Relu => relu(x),
            // NaN and -0 kept.
            Rectifier::Relu6 => x.clamp(0.0, 6.0),
        }
    }
}

/// What [`gemm_finished`](super::gemm_finished) does to row `i` of C
/// after the product: `bias[i]` added, then the [`Rectifier`] (a
/// convolution's output channel `i`, its bias and folded `ReLU`).
///
/// ```
/// use blob_kernels::cpu::{Rectifier, RowFinish};
/// let finish = RowFinish { bias: &[0.5, -0.5], rectifier: Rectifier::Relu };
/// assert_eq!(finish.apply(1, 0.25), 0.0);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RowFinish<'a> {
    /// One value a row of C.
    pub bias: &'a [f32],
    /// Applied after the bias.
    pub rectifier: Rectifier,
}

impl RowFinish<'_> {
    /// Row `row`'s value `v` finished.
    ///
    /// # Panics
    /// If `row` has no bias.
    #[inline(always)]
    pub fn apply(self, row: usize, v: f32) -> f32 {
        self.rectifier.apply(v + self.bias[row])
    }
}

/// Caffe's `ReLU` of one value, `std::max(x, 0) + 0 * std::min(x, 0)`,
/// its bits: `x` above 0 and NaN kept, -0 kept, other negatives +0, and
/// -inf NaN (the `0 * -inf` of its sum).
///
/// ```
/// use blob_kernels::cpu::relu;
/// assert_eq!(relu(2.5), 2.5);
/// assert_eq!(relu(-2.5).to_bits(), 0.0f32.to_bits());
/// assert_eq!(relu(-0.0).to_bits(), (-0.0f32).to_bits());
/// assert!(relu(f32::NEG_INFINITY).is_nan() && relu(f32::INFINITY) == f32::INFINITY);
/// ```
#[inline(always)]
pub fn relu(x: f32) -> f32 {
    let high = if x < 0.0 { 0.0 } else { x };
    let low = if 0.0 < x { 0.0 } else { x };
    high + 0.0 * low
}

/// `acc + bias` rectified, in registers, with [`Rectifier::apply`]'s
/// bits. For ReLU, `max(0, v)` (NaN and -0 kept, as x86's `max` returns
/// its second operand for them) is [`relu`] but where `v` is -inf, which
/// [`relu`] makes the NaN of `0 * -inf`; `ReLU6` then takes `min(6, _)`,
/// which keeps NaN the same way.
///
/// # Safety
/// `L`'s instructions are enabled.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn finished<L: Lanes>(acc: L::V, bias: L::V, rectifier: Rectifier) -> L::V {
    // SAFETY: the caller has `L`.
    unsafe {
        let v = L::add(acc, bias);
        match rectifier {
            Rectifier::None => v,
            Rectifier::Relu => {
                let kept = L::max(L::zero(), v);
                // What x86 makes of `0 * -inf` at run time (the compiler,
                // folding `relu(-inf)`, would make a positive NaN).
                let nan = L::splat(f32::from_bits(0xffc0_0000));
                L::where_greater(L::splat(-f32::MAX), v, nan, kept)
            }
            Rectifier::Relu6 => L::min(L::splat(6.0), L::max(L::zero(), v)),
        }
    }
}
