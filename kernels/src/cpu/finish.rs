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
/// after the product: `bias[i]` added, then the [`Shortcut`] where
/// there is one, then the [`Rectifier`] (a convolution's output channel
/// `i`, its bias, the residual add and the `ReLU` a net folds into it).
///
/// ```
/// use blob_kernels::cpu::{Rectifier, RowFinish, Shortcut};
/// let finish = RowFinish { bias: &[0.5, -0.5], shortcut: None, rectifier: Rectifier::Relu };
/// assert_eq!(finish.apply(1, 0, 0.25), 0.0);
/// // C of 2 x 2; the value at index 3 (row 1) gets its shortcut's 1.0 added.
/// let values = [0.0, 0.0, 0.0, 1.0];
/// let shortcut = Some(Shortcut { values: &values, first: false });
/// assert_eq!(RowFinish { shortcut, ..finish }.apply(1, 3, 0.25), 0.75);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RowFinish<'a> {
    /// One value a row of C.
    pub bias: &'a [f32],
    /// Added after the bias, value by value.
    pub shortcut: Option<Shortcut<'a>>,
    /// Applied last.
    pub rectifier: Rectifier,
}

/// Values a net's Eltwise SUM adds to a convolution's output (ResNet's
/// shortcut into its residual branch), laid out as C, added as the
/// product stores C rather than in a pass of their own.
///
/// ```
/// use blob_kernels::cpu::Shortcut;
/// let values = [-0.0f32];
/// // Caffe's SUM is a zero fill and an axpy a bottom: `(0 + first) + second`.
/// let first = Shortcut { values: &values, first: true };
/// assert_eq!(first.add(0, -0.0).to_bits(), 0.0f32.to_bits());
/// assert_eq!(first.add(0, 2.0), 2.0);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Shortcut<'a> {
    /// One value for each of C's, at the same index.
    pub values: &'a [f32],
    /// Whether these are the Eltwise's first bottom (the sum is then
    /// `(0 + shortcut) + product`) or its second (`(0 + product) +
    /// shortcut`): the two differ at -0.
    pub first: bool,
}

impl Shortcut<'_> {
    /// `v`, the value of C at `at`, with its shortcut added.
    ///
    /// # Panics
    /// If `at` has no shortcut value.
    #[inline(always)]
    pub fn add(self, at: usize, v: f32) -> f32 {
        let s = self.values[at];
        if self.first {
            (0.0 + s) + v
        } else {
            (0.0 + v) + s
        }
    }
}

impl RowFinish<'_> {
    /// Row `row`'s value `v`, at index `at` of C, finished.
    ///
    /// # Panics
    /// If `row` has no bias, or `at` no shortcut value where there are
    /// some.
    #[inline(always)]
    pub fn apply(self, row: usize, at: usize, v: f32) -> f32 {
        let v = v + self.bias[row];
        let v = match self.shortcut {
            Some(shortcut) => shortcut.add(at, v),
            None => v,
        };
        self.rectifier.apply(v)
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
/// bits ([`rectified`]).
///
/// # Safety
/// `L`'s instructions are enabled.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn finished<L: Lanes>(acc: L::V, bias: L::V, rectifier: Rectifier) -> L::V {
    // SAFETY: the caller has `L`.
    unsafe { rectified::<L>(L::add(acc, bias), rectifier) }
}

/// `v` rectified, in registers, with [`Rectifier::apply`]'s bits. For
/// ReLU, `max(0, v)` (NaN and -0 kept, as x86's `max` returns its
/// second operand for them) is [`relu`] but where `v` is -inf, which
/// [`relu`] makes the NaN of `0 * -inf`; `ReLU6` then takes `min(6, _)`,
/// which keeps NaN the same way.
///
/// # Safety
/// `L`'s instructions are enabled.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn rectified<L: Lanes>(v: L::V, rectifier: Rectifier) -> L::V {
    // SAFETY: the caller has `L`.
    unsafe {
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
