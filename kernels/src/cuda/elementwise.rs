//! Caffe's hand-written element-wise GPU kernels (`math_functions.cu`):
//! `elementwise.cu` and its launchers.

use cudarc::driver::{CudaView, CudaViewMut};

use super::{CudaError, Gpu, GpuReal, check_len, launch_config, len_i64};

crate::cuda_kernels! {
    /// `elementwise.cu`: set, add_scalar, powx, and the unary and binary
    /// maps, each for `f32` and `f64`.
    pub static ELEMENTWISE = "elementwise.cu";
    fn set<T>(n: i64, alpha: T, y: &mut CudaViewMut<'_, T>);
    fn add_scalar<T>(n: i64, alpha: T, y: &mut CudaViewMut<'_, T>);
    fn powx<T>(n: i64, a: &CudaView<'_, T>, p: T, y: &mut CudaViewMut<'_, T>);
    fn abs<T>(n: i64, a: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn fabs<T>(n: i64, a: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn exp<T>(n: i64, a: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn log<T>(n: i64, a: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn sqrt<T>(n: i64, a: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn sqr<T>(n: i64, a: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn sign<T>(n: i64, a: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn sgnbit<T>(n: i64, a: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn add<T>(n: i64, a: &CudaView<'_, T>, b: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn sub<T>(n: i64, a: &CudaView<'_, T>, b: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn mul<T>(n: i64, a: &CudaView<'_, T>, b: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
    fn div<T>(n: i64, a: &CudaView<'_, T>, b: &CudaView<'_, T>, y: &mut CudaViewMut<'_, T>);
}

/// The element-wise unary kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// `|a|`
    Abs,
    /// `|a|` (Caffe `fabs`)
    Fabs,
    /// `e^a`
    Exp,
    /// `ln a`
    Log,
    /// `sqrt a`
    Sqrt,
    /// `a^2`
    Sqr,
    /// `sign(a)`, 0 for ±0 and NaN
    Sign,
    /// `signbit(a)` as 0 or 1
    Sgnbit,
}

/// The element-wise binary kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
}

impl Gpu {
    /// `y[i] = alpha` (Caffe `caffe_gpu_set`).
    pub fn set<T: GpuReal>(&self, alpha: T, y: &mut CudaViewMut<'_, T>) -> Result<(), CudaError> {
        let n = y.len();
        if n == 0 {
            return Ok(());
        }
        // SAFETY: set writes y[0..n], and y holds n elements.
        unsafe { set(self, launch_config(n), len_i64(n), alpha, y) }
    }

    /// `y[i] += alpha` (Caffe `caffe_gpu_add_scalar`).
    pub fn add_scalar<T: GpuReal>(
        &self,
        alpha: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        if n == 0 {
            return Ok(());
        }
        // SAFETY: add_scalar rewrites y[0..n], and y holds n elements.
        unsafe { add_scalar(self, launch_config(n), len_i64(n), alpha, y) }
    }

    /// `y = a^p` (Caffe `caffe_gpu_powx`).
    pub fn powx<T: GpuReal>(
        &self,
        a: &CudaView<'_, T>,
        p: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        check_len("powx", "a", a.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: powx reads a[0..n] and writes y[0..n]; both hold n.
        unsafe { powx(self, launch_config(n), len_i64(n), a, p, y) }
    }

    /// `y = op(a)` (Caffe `caffe_gpu_<op>`).
    pub fn unary<T: GpuReal>(
        &self,
        op: UnaryOp,
        a: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        check_len("unary map", "a", a.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let launch = match op {
            UnaryOp::Abs => abs::<T>,
            UnaryOp::Fabs => fabs::<T>,
            UnaryOp::Exp => exp::<T>,
            UnaryOp::Log => log::<T>,
            UnaryOp::Sqrt => sqrt::<T>,
            UnaryOp::Sqr => sqr::<T>,
            UnaryOp::Sign => sign::<T>,
            UnaryOp::Sgnbit => sgnbit::<T>,
        };
        // SAFETY: each unary kernel reads a[0..n] and writes y[0..n]; both
        // hold n elements.
        unsafe { launch(self, launch_config(n), len_i64(n), a, y) }
    }

    /// `y = a op b` (Caffe `caffe_gpu_<op>`).
    pub fn binary<T: GpuReal>(
        &self,
        op: BinaryOp,
        a: &CudaView<'_, T>,
        b: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        check_len("binary map", "a", a.len(), n)?;
        check_len("binary map", "b", b.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let launch = match op {
            BinaryOp::Add => add::<T>,
            BinaryOp::Sub => sub::<T>,
            BinaryOp::Mul => mul::<T>,
            BinaryOp::Div => div::<T>,
        };
        // SAFETY: each binary kernel reads a and b and writes y, each of n
        // elements.
        unsafe { launch(self, launch_config(n), len_i64(n), a, b, y) }
    }
}
