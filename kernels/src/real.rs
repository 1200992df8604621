//! The floating-point element types the math kernels accept.

use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub};

pub(crate) mod sealed {
    /// Keeps [`super::Real`] closed to f32/f64 and carries the per-type gemm
    /// entry point, which callers reach through `cpu::gemm` only.
    pub trait Sealed: Sized {
        /// `c = alpha * a * b + beta * c` with explicit [row, column] strides.
        ///
        /// # Safety
        /// Every element the strides reach from `a` (`m x k`), `b`
        /// (`k x n`) and `c` (`m x n`) is inside its allocation; the
        /// elements of `c` it reaches are written by no one else meanwhile
        /// and alias neither `a` nor `b`.
        #[allow(clippy::too_many_arguments)]
        unsafe fn matmul(
            m: usize,
            k: usize,
            n: usize,
            alpha: Self,
            a: *const Self,
            sa: [isize; 2],
            b: *const Self,
            sb: [isize; 2],
            beta: Self,
            c: *mut Self,
            sc: [isize; 2],
        );
    }

    macro_rules! sealed_gemm {
        ($t:ty, $f:path $(, $own:path)?) => {
            impl Sealed for $t {
                unsafe fn matmul(
                    m: usize,
                    k: usize,
                    n: usize,
                    alpha: Self,
                    a: *const Self,
                    sa: [isize; 2],
                    b: *const Self,
                    sb: [isize; 2],
                    beta: Self,
                    c: *mut Self,
                    sc: [isize; 2],
                ) {
                    $(
                        // SAFETY: the caller's contract is the kernel's.
                        if unsafe { $own(m, k, n, alpha, a, sa, b, sb, beta, c, sc) } {
                            return;
                        }
                    )?
                    // SAFETY: the caller's contract is matrixmultiply's.
                    unsafe {
                        $f(
                            m, k, n, alpha, a, sa[0], sa[1], b, sb[0], sb[1], beta, c, sc[0], sc[1],
                        )
                    }
                }
            }
        };
    }
    #[cfg(target_arch = "x86_64")]
    sealed_gemm!(f32, matrixmultiply::sgemm, crate::cpu::sgemm::run_if_suited);
    #[cfg(not(target_arch = "x86_64"))]
    sealed_gemm!(f32, matrixmultiply::sgemm);
    sealed_gemm!(f64, matrixmultiply::dgemm);
}

/// A floating-point type the math kernels are written for: `f32` or `f64`.
///
/// Caffe instantiates its math for `float` and `double` only; this trait is
/// sealed for the same reason.
///
/// ```
/// use blob_kernels::Real;
/// fn half<T: Real>(x: T) -> T { x * T::from_f64(0.5) }
/// assert_eq!(half(3.0f32), 1.5);
/// ```
pub trait Real:
    sealed::Sealed
    + Copy
    + Send
    + Sync
    + Default
    + PartialEq
    + PartialOrd
    + Debug
    + Display
    + Sum
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + MulAssign
    + 'static
{
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// The type's name as Rust spells it (`"f32"`).
    const NAME: &'static str;
    /// Converts from `f64`, rounding to nearest.
    fn from_f64(v: f64) -> Self;
    /// Widens to `f64` (exact).
    fn to_f64(self) -> f64;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// `e^self`.
    fn exp(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// `self^p`.
    fn powf(self, p: Self) -> Self;
    /// Whether the sign bit is set (true for -0.0).
    fn is_sign_negative(self) -> bool;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
}

macro_rules! impl_real {
    ($t:ty) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NAME: &'static str = stringify!($t);
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn powf(self, p: Self) -> Self {
                <$t>::powf(self, p)
            }
            #[inline(always)]
            fn is_sign_negative(self) -> bool {
                <$t>::is_sign_negative(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}
impl_real!(f32);
impl_real!(f64);
