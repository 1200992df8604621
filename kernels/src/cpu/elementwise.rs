//! Element-wise loops: Caffe's `caffe_add`, `caffe_exp`, `caffe_cpu_sign`, ...
//!
//! Binary ops write `y[i] = a[i] op b[i]`; unary ops write `y[i] = f(a[i])`.
//! Each has an `_inplace` form for Caffe's common `caffe_exp(n, y, y)` use,
//! which Rust's borrow rules would otherwise forbid.

use std::any::TypeId;

use super::exp::exp_f32;
use super::{check_len, vectorized};
use crate::Real;

macro_rules! binary_op {
    ($(#[$doc:meta])* $name:ident, $inplace:ident, |$a:ident, $b:ident| $body:expr) => {
        $(#[$doc])*
        #[track_caller]
        pub fn $name<T: Real>(a: &[T], b: &[T], y: &mut [T]) {
            check_len(stringify!($name), "b", b.len(), a.len());
            check_len(stringify!($name), "y", y.len(), a.len());
            vectorized(#[inline(always)] || {
                for ((yi, &$a), &$b) in y.iter_mut().zip(a).zip(b) {
                    *yi = $body;
                }
            });
        }

        #[doc = concat!("In-place [`", stringify!($name), "`]: `y[i] = y[i] op b[i]`.")]
        #[track_caller]
        pub fn $inplace<T: Real>(y: &mut [T], b: &[T]) {
            check_len(stringify!($inplace), "b", b.len(), y.len());
            vectorized(#[inline(always)] || {
                for (yi, &$b) in y.iter_mut().zip(b) {
                    let $a = *yi;
                    *yi = $body;
                }
            });
        }
    };
}

macro_rules! unary_op {
    ($(#[$doc:meta])* $name:ident, $inplace:ident, |$a:ident| $body:expr) => {
        $(#[$doc])*
        #[track_caller]
        pub fn $name<T: Real>(a: &[T], y: &mut [T]) {
            check_len(stringify!($name), "y", y.len(), a.len());
            vectorized(#[inline(always)] || {
                for (yi, &$a) in y.iter_mut().zip(a) {
                    *yi = $body;
                }
            });
        }

        #[doc = concat!("In-place [`", stringify!($name), "`].")]
        pub fn $inplace<T: Real>(y: &mut [T]) {
            vectorized(#[inline(always)] || {
                for yi in y.iter_mut() {
                    let $a = *yi;
                    *yi = $body;
                }
            });
        }
    };
}

binary_op!(
    /// `y = a + b` (Caffe `caffe_add`).
    ///
    /// ```
    /// let mut y = [0.0f32; 2];
    /// blob_kernels::cpu::add(&[1.0, 2.0], &[3.0, 4.0], &mut y);
    /// assert_eq!(y, [4.0, 6.0]);
    /// ```
    add, add_inplace, |a, b| a + b
);
binary_op!(
    /// `y = a - b` (Caffe `caffe_sub`).
    ///
    /// ```
    /// let mut y = [0.0f32; 2];
    /// blob_kernels::cpu::sub(&[1.0, 2.0], &[3.0, 4.0], &mut y);
    /// assert_eq!(y, [-2.0, -2.0]);
    /// ```
    sub, sub_inplace, |a, b| a - b
);
binary_op!(
    /// `y = a * b` element-wise (Caffe `caffe_mul`).
    ///
    /// ```
    /// let mut y = [0.0f32; 2];
    /// blob_kernels::cpu::mul(&[1.0, 2.0], &[3.0, 4.0], &mut y);
    /// assert_eq!(y, [3.0, 8.0]);
    /// ```
    mul, mul_inplace, |a, b| a * b
);
binary_op!(
    /// `y = a / b` element-wise (Caffe `caffe_div`).
    ///
    /// ```
    /// let mut y = [0.0f32; 2];
    /// blob_kernels::cpu::div(&[1.0, 2.0], &[4.0, 4.0], &mut y);
    /// assert_eq!(y, [0.25, 0.5]);
    /// ```
    div, div_inplace, |a, b| a / b
);

unary_op!(
    /// `y = a^2` (Caffe `caffe_sqr`).
    ///
    /// ```
    /// let mut y = [0.0f32; 2];
    /// blob_kernels::cpu::sqr(&[3.0, -2.0], &mut y);
    /// assert_eq!(y, [9.0, 4.0]);
    /// ```
    sqr, sqr_inplace, |a| a * a
);
unary_op!(
    /// `y = sqrt(a)` (Caffe `caffe_sqrt`).
    ///
    /// ```
    /// let mut y = [0.0f64; 2];
    /// blob_kernels::cpu::sqrt(&[9.0, 4.0], &mut y);
    /// assert_eq!(y, [3.0, 2.0]);
    /// ```
    sqrt, sqrt_inplace, |a| a.sqrt()
);
/// `y = e^a` (Caffe `caffe_exp`): `f32` through [`exp_f32`] (vectorized;
/// the correctly rounded value, as libm's `expf` gives but for about one
/// value in 2,000, a last bit apart), `f64` through libm.
///
/// ```
/// let mut y = [0.0f64; 1];
/// blob_kernels::cpu::exp(&[0.0], &mut y);
/// assert_eq!(y, [1.0]);
/// ```
#[track_caller]
pub fn exp<T: Real>(a: &[T], y: &mut [T]) {
    check_len("exp", "y", y.len(), a.len());
    if let (Some(a), Some(y)) = (as_f32(a), as_f32_mut(y)) {
        vectorized(
            #[inline(always)]
            || {
                for (yi, &a) in y.iter_mut().zip(a) {
                    *yi = exp_f32(a);
                }
            },
        );
        return;
    }
    for (yi, &a) in y.iter_mut().zip(a) {
        *yi = a.exp();
    }
}

/// In-place [`exp`].
pub fn exp_inplace<T: Real>(y: &mut [T]) {
    if let Some(y) = as_f32_mut(y) {
        vectorized(
            #[inline(always)]
            || {
                for yi in y.iter_mut() {
                    *yi = exp_f32(*yi);
                }
            },
        );
        return;
    }
    for yi in y.iter_mut() {
        *yi = yi.exp();
    }
}

/// `values` as `f32`s, where `T` is `f32`.
fn as_f32<T: 'static>(values: &[T]) -> Option<&[f32]> {
    (TypeId::of::<T>() == TypeId::of::<f32>())
        // SAFETY: T is f32: the same values, length and alignment.
        .then(|| unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), values.len()) })
}

/// [`as_f32`] of a mutable slice.
fn as_f32_mut<T: 'static>(values: &mut [T]) -> Option<&mut [f32]> {
    (TypeId::of::<T>() == TypeId::of::<f32>()).then(|| {
        // SAFETY: T is f32: the same values, length and alignment; the
        // borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast(), values.len()) }
    })
}
unary_op!(
    /// `y = ln(a)` (Caffe `caffe_log`).
    ///
    /// ```
    /// let mut y = [0.0f64; 1];
    /// blob_kernels::cpu::log(&[1.0], &mut y);
    /// assert_eq!(y, [0.0]);
    /// ```
    log, log_inplace, |a| a.ln()
);
unary_op!(
    /// `y = |a|` (Caffe `caffe_abs`).
    ///
    /// ```
    /// let mut y = [0.0f32; 2];
    /// blob_kernels::cpu::abs(&[-1.5, 2.0], &mut y);
    /// assert_eq!(y, [1.5, 2.0]);
    /// ```
    abs, abs_inplace, |a| a.abs()
);
unary_op!(
    /// `y = |a|` (Caffe `caffe_cpu_fabs`; the same as [`abs`], kept for
    /// Caffe's name). `fabs(-0.0)` is `+0.0`.
    ///
    /// ```
    /// let mut y = [0.0f32; 1];
    /// blob_kernels::cpu::fabs(&[-0.0], &mut y);
    /// assert!(y[0].is_sign_positive());
    /// ```
    fabs, fabs_inplace, |a| a.abs()
);
unary_op!(
    /// `y = sign(a)`: 1, -1, or 0 for ±0 and NaN (Caffe `caffe_cpu_sign`,
    /// `(0 < x) - (x < 0)`).
    ///
    /// ```
    /// let mut y = [9.0f32; 4];
    /// blob_kernels::cpu::sign(&[2.0, -3.0, -0.0, f32::NAN], &mut y);
    /// assert_eq!(y, [1.0, -1.0, 0.0, 0.0]);
    /// ```
    sign, sign_inplace, |a| {
        let pos = if T::ZERO < a { T::ONE } else { T::ZERO };
        let neg = if a < T::ZERO { T::ONE } else { T::ZERO };
        pos - neg
    }
);
unary_op!(
    /// `y = signbit(a)` as 0 or 1: 1 for -0.0 and any negative, including a
    /// NaN with its sign bit set (Caffe `caffe_cpu_sgnbit`).
    ///
    /// ```
    /// let mut y = [9.0f32; 3];
    /// blob_kernels::cpu::sgnbit(&[2.0, -0.0, -1.0], &mut y);
    /// assert_eq!(y, [0.0, 1.0, 1.0]);
    /// ```
    sgnbit, sgnbit_inplace, |a| if a.is_sign_negative() { T::ONE } else { T::ZERO }
);

/// `y = a^b` for a scalar exponent (Caffe `caffe_powx`).
///
/// ```
/// let mut y = [0.0f64; 2];
/// blob_kernels::cpu::powx(&[2.0, 3.0], 2.0, &mut y);
/// assert_eq!(y, [4.0, 9.0]);
/// ```
#[track_caller]
pub fn powx<T: Real>(a: &[T], b: T, y: &mut [T]) {
    check_len("powx", "y", y.len(), a.len());
    for (yi, &ai) in y.iter_mut().zip(a) {
        *yi = ai.powf(b);
    }
}

/// `y += alpha` for every element (Caffe `caffe_add_scalar`).
///
/// ```
/// let mut y = [1.0f32, 2.0];
/// blob_kernels::cpu::add_scalar(0.5, &mut y);
/// assert_eq!(y, [1.5, 2.5]);
/// ```
pub fn add_scalar<T: Real>(alpha: T, y: &mut [T]) {
    vectorized(
        #[inline(always)]
        || {
            for yi in y.iter_mut() {
                *yi += alpha;
            }
        },
    );
}
