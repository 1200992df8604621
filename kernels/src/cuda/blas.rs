//! cuBLAS for the BLAS half of Caffe's GPU math: gemm, gemv, axpy, axpby,
//! scal, dot, asum and scale (Caffe `caffe_gpu_*`), row-major as Caffe
//! calls them.

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, result::CublasError, sys as cublas_sys};
use cudarc::driver::{CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use super::{CudaError, Gpu, check_len};
use crate::cpu::Transpose;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// `f32` or `f64` on the GPU: which instance of a generic kernel to
/// launch, and the typed cuBLAS calls.
pub trait GpuReal:
    sealed::Sealed
    + crate::Real
    + super::KernelArg
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
{
    /// 0 for `f32`, 1 for `f64`: the instance of a kernel declared generic
    /// in [`cuda_kernels!`](crate::cuda_kernels).
    const INDEX: usize;
    #[doc(hidden)]
    unsafe fn axpy(
        h: cublas_sys::cublasHandle_t,
        n: i32,
        a: *const Self,
        x: *const Self,
        y: *mut Self,
    ) -> cublas_sys::cublasStatus_t;
    #[doc(hidden)]
    unsafe fn scal(
        h: cublas_sys::cublasHandle_t,
        n: i32,
        a: *const Self,
        x: *mut Self,
    ) -> cublas_sys::cublasStatus_t;
    #[doc(hidden)]
    unsafe fn dot(
        h: cublas_sys::cublasHandle_t,
        n: i32,
        x: *const Self,
        y: *const Self,
        r: *mut Self,
    ) -> cublas_sys::cublasStatus_t;
    #[doc(hidden)]
    unsafe fn asum(
        h: cublas_sys::cublasHandle_t,
        n: i32,
        x: *const Self,
        r: *mut Self,
    ) -> cublas_sys::cublasStatus_t;
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemv(
        h: cublas_sys::cublasHandle_t,
        t: cublas_sys::cublasOperation_t,
        m: i32,
        n: i32,
        a: *const Self,
        x: *const Self,
        beta: *const Self,
        y: *mut Self,
        alpha: *const Self,
    ) -> cublas_sys::cublasStatus_t;
}

macro_rules! gpu_real {
    ($t:ty, $index:literal, $axpy:ident, $scal:ident, $dot:ident, $asum:ident, $gemv:ident) => {
        impl GpuReal for $t {
            const INDEX: usize = $index;
            unsafe fn axpy(
                h: cublas_sys::cublasHandle_t,
                n: i32,
                a: *const Self,
                x: *const Self,
                y: *mut Self,
            ) -> cublas_sys::cublasStatus_t {
                // SAFETY: forwarded from the caller's contract.
                unsafe { cublas_sys::$axpy(h, n, a, x, 1, y, 1) }
            }
            unsafe fn scal(
                h: cublas_sys::cublasHandle_t,
                n: i32,
                a: *const Self,
                x: *mut Self,
            ) -> cublas_sys::cublasStatus_t {
                // SAFETY: forwarded from the caller's contract.
                unsafe { cublas_sys::$scal(h, n, a, x, 1) }
            }
            unsafe fn dot(
                h: cublas_sys::cublasHandle_t,
                n: i32,
                x: *const Self,
                y: *const Self,
                r: *mut Self,
            ) -> cublas_sys::cublasStatus_t {
                // SAFETY: forwarded from the caller's contract.
                unsafe { cublas_sys::$dot(h, n, x, 1, y, 1, r) }
            }
            unsafe fn asum(
                h: cublas_sys::cublasHandle_t,
                n: i32,
                x: *const Self,
                r: *mut Self,
            ) -> cublas_sys::cublasStatus_t {
                // SAFETY: forwarded from the caller's contract.
                unsafe { cublas_sys::$asum(h, n, x, 1, r) }
            }
            unsafe fn gemv(
                h: cublas_sys::cublasHandle_t,
                t: cublas_sys::cublasOperation_t,
                m: i32,
                n: i32,
                a: *const Self,
                x: *const Self,
                beta: *const Self,
                y: *mut Self,
                alpha: *const Self,
            ) -> cublas_sys::cublasStatus_t {
                // SAFETY: forwarded from the caller's contract.
                unsafe { cublas_sys::$gemv(h, t, m, n, alpha, a, m, x, 1, beta, y, 1) }
            }
        }
    };
}
gpu_real!(
    f32,
    0,
    cublasSaxpy_v2,
    cublasSscal_v2,
    cublasSdot_v2,
    cublasSasum_v2,
    cublasSgemv_v2
);
gpu_real!(
    f64,
    1,
    cublasDaxpy_v2,
    cublasDscal_v2,
    cublasDdot_v2,
    cublasDasum_v2,
    cublasDgemv_v2
);

impl Gpu {
    fn handle(&self) -> cublas_sys::cublasHandle_t {
        *self.blas.handle()
    }

    /// `y += alpha x` (cuBLAS axpy; Caffe `caffe_gpu_axpy`).
    pub fn axpy<T: GpuReal>(
        &self,
        alpha: T,
        x: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        check_len("axpy", "x", x.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let n = len_i32("cublasAxpy", n)?;
        let (xp, _rx) = x.device_ptr(&self.stream);
        let (yp, _ry) = y.device_ptr_mut(&self.stream);
        // SAFETY: x and y hold n elements on this stream's device; alpha is
        // a host scalar (cuBLAS's default pointer mode).
        check("cublasAxpy", unsafe {
            T::axpy(self.handle(), n, &alpha, xp as *const T, yp as *mut T)
        })
    }

    /// `x *= alpha` (cuBLAS scal; Caffe `caffe_gpu_scal`).
    pub fn scal<T: GpuReal>(&self, alpha: T, x: &mut CudaViewMut<'_, T>) -> Result<(), CudaError> {
        let n = x.len();
        if n == 0 {
            return Ok(());
        }
        let n = len_i32("cublasScal", n)?;
        let (xp, _rx) = x.device_ptr_mut(&self.stream);
        // SAFETY: x holds n elements; alpha is a host scalar.
        check("cublasScal", unsafe {
            T::scal(self.handle(), n, &alpha, xp as *mut T)
        })
    }

    /// `y = alpha x + beta y` (Caffe `caffe_gpu_axpby`: scal then axpy).
    pub fn axpby<T: GpuReal>(
        &self,
        alpha: T,
        x: &CudaView<'_, T>,
        beta: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        self.scal(beta, y)?;
        self.axpy(alpha, x, y)
    }

    /// `y = x` on the device (Caffe `caffe_copy` between device pointers).
    ///
    /// ```no_run
    /// # fn demo(gpu: &blob_kernels::cuda::Gpu) -> Result<(), blob_kernels::cuda::CudaError> {
    /// let x = gpu.stream().clone_htod(&[1.0f32, 2.0]).unwrap();
    /// let mut y = gpu.stream().alloc_zeros::<f32>(2).unwrap();
    /// gpu.copy(&x.as_view(), &mut y.as_view_mut())?;
    /// # Ok(()) }
    /// ```
    pub fn copy<T: GpuReal>(
        &self,
        x: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        check_len("copy", "x", x.len(), y.len())?;
        if y.is_empty() {
            return Ok(());
        }
        self.stream
            .memcpy_dtod(x, y)
            .map_err(CudaError::driver("copy"))
    }

    /// `y = alpha x` (Caffe `caffe_gpu_scale`: copy then scal).
    pub fn scale<T: GpuReal>(
        &self,
        alpha: T,
        x: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        self.copy(x, y)?;
        self.scal(alpha, y)
    }

    /// Dot product, returned to the host (Caffe `caffe_gpu_dot`).
    pub fn dot<T: GpuReal>(
        &self,
        x: &CudaView<'_, T>,
        y: &CudaView<'_, T>,
    ) -> Result<T, CudaError> {
        check_len("dot", "y", y.len(), x.len())?;
        if x.is_empty() {
            return Ok(T::ZERO);
        }
        let n = len_i32("cublasDot", x.len())?;
        let (xp, _rx) = x.device_ptr(&self.stream);
        let (yp, _ry) = y.device_ptr(&self.stream);
        let mut r = T::ZERO;
        // SAFETY: x and y hold n elements; the result goes to a host scalar,
        // which cuBLAS writes before returning in host pointer mode.
        check("cublasDot", unsafe {
            T::dot(self.handle(), n, xp as *const T, yp as *const T, &mut r)
        })?;
        Ok(r)
    }

    /// Sum of `|x|`, returned to the host (Caffe `caffe_gpu_asum`).
    pub fn asum<T: GpuReal>(&self, x: &CudaView<'_, T>) -> Result<T, CudaError> {
        if x.is_empty() {
            return Ok(T::ZERO);
        }
        let n = len_i32("cublasAsum", x.len())?;
        let (xp, _rx) = x.device_ptr(&self.stream);
        let mut r = T::ZERO;
        // SAFETY: x holds n elements; the result goes to a host scalar.
        check("cublasAsum", unsafe {
            T::asum(self.handle(), n, xp as *const T, &mut r)
        })?;
        Ok(r)
    }

    /// Row-major `C = alpha op(A) op(B) + beta C` (Caffe `caffe_gpu_gemm`,
    /// which swaps the operands for column-major cuBLAS).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm<T: GpuReal>(
        &self,
        trans_a: Transpose,
        trans_b: Transpose,
        m: usize,
        n: usize,
        k: usize,
        alpha: T,
        a: &CudaView<'_, T>,
        b: &CudaView<'_, T>,
        beta: T,
        c: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError>
    where
        CudaBlas: Gemm<T>,
    {
        if a.len() < m * k || b.len() < k * n || c.len() < m * n {
            return Err(CudaError::Argument {
                op: "gemm",
                detail: format!(
                    "{m}x{k} * {k}x{n} needs operands of {}, {} and {} elements, got {}, {} and {}",
                    m * k,
                    k * n,
                    m * n,
                    a.len(),
                    b.len(),
                    c.len()
                ),
            });
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let cm = ColumnMajorGemm::for_row_major(trans_a, trans_b, m, n, k);
        let cfg = GemmConfig {
            transa: operation(cm.trans_first),
            transb: operation(cm.trans_second),
            m: len_i32("cublasGemm", cm.m)?,
            n: len_i32("cublasGemm", cm.n)?,
            k: len_i32("cublasGemm", cm.k)?,
            alpha,
            lda: len_i32("cublasGemm", cm.ld_first)?,
            ldb: len_i32("cublasGemm", cm.ld_second)?,
            beta,
            ldc: len_i32("cublasGemm", cm.ldc)?,
        };
        // SAFETY: the operands hold at least the elements their dims reach
        // (checked above); B goes first, as ColumnMajorGemm says.
        unsafe { self.blas.gemm(cfg, b, a, c) }.map_err(CudaError::blas("cublasGemm"))
    }

    /// Row-major `y = alpha op(A) x + beta y` with `A` stored `m x n`
    /// (Caffe `caffe_gpu_gemv`, which flips the op for column-major).
    #[allow(clippy::too_many_arguments)]
    pub fn gemv<T: GpuReal>(
        &self,
        trans: Transpose,
        m: usize,
        n: usize,
        alpha: T,
        a: &CudaView<'_, T>,
        x: &CudaView<'_, T>,
        beta: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let (xn, yn) = if trans == Transpose::No {
            (n, m)
        } else {
            (m, n)
        };
        if a.len() < m * n || x.len() != xn || y.len() != yn {
            return Err(CudaError::Argument {
                op: "gemv",
                detail: format!(
                    "A {m}x{n} does not fit x of {} and y of {}",
                    x.len(),
                    y.len()
                ),
            });
        }
        if m == 0 || n == 0 {
            return self.scal(beta, y);
        }
        let cm = ColumnMajorGemv::for_row_major(trans, m, n);
        let (ap, _ra) = a.device_ptr(&self.stream);
        let (xp, _rx) = x.device_ptr(&self.stream);
        let (yp, _ry) = y.device_ptr_mut(&self.stream);
        // SAFETY: A is m x n (row-major, so n x m column-major with lda n),
        // x and y have the lengths op(A) needs; scalars are on the host.
        check("cublasGemv", unsafe {
            T::gemv(
                self.handle(),
                operation(cm.trans),
                len_i32("cublasGemv", cm.rows)?,
                len_i32("cublasGemv", cm.cols)?,
                ap as *const T,
                xp as *const T,
                &beta,
                yp as *mut T,
                &alpha,
            )
        })
    }
}

fn operation(t: Transpose) -> cublas_sys::cublasOperation_t {
    match t {
        Transpose::No => cublas_sys::cublasOperation_t::CUBLAS_OP_N,
        Transpose::Yes => cublas_sys::cublasOperation_t::CUBLAS_OP_T,
    }
}

fn flipped(t: Transpose) -> Transpose {
    match t {
        Transpose::No => Transpose::Yes,
        Transpose::Yes => Transpose::No,
    }
}

/// How a row-major `C = op(A) op(B)` is asked of column-major cuBLAS, as
/// Caffe's `caffe_gpu_gemm` asks it: a row-major matrix read column-major
/// is its transpose, so cuBLAS computes `C^T = op(B)^T op(A)^T` with `B`
/// as its first operand and `A` as its second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ColumnMajorGemm {
    /// The op on the first operand (`B`).
    trans_first: Transpose,
    /// The op on the second operand (`A`).
    trans_second: Transpose,
    /// Rows of `C^T`: `n`.
    m: usize,
    /// Columns of `C^T`: `m`.
    n: usize,
    k: usize,
    /// The leading dimension of `B` as stored.
    ld_first: usize,
    /// The leading dimension of `A` as stored.
    ld_second: usize,
    ldc: usize,
}

impl ColumnMajorGemm {
    fn for_row_major(trans_a: Transpose, trans_b: Transpose, m: usize, n: usize, k: usize) -> Self {
        Self {
            trans_first: trans_b,
            trans_second: trans_a,
            m: n,
            n: m,
            k,
            ld_first: if trans_b == Transpose::No { n } else { k },
            ld_second: if trans_a == Transpose::No { k } else { m },
            ldc: n,
        }
    }
}

/// How a row-major `y = op(A) x` with `A` stored `m x n` is asked of
/// cuBLAS (Caffe's `caffe_gpu_gemv`): the stored matrix read
/// column-major is `A^T`, `n x m` with leading dimension `n`, so the op
/// flips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ColumnMajorGemv {
    trans: Transpose,
    /// Rows of the column-major matrix (its leading dimension too): `n`.
    rows: usize,
    /// Its columns: `m`.
    cols: usize,
}

impl ColumnMajorGemv {
    fn for_row_major(trans: Transpose, m: usize, n: usize) -> Self {
        Self {
            trans: flipped(trans),
            rows: n,
            cols: m,
        }
    }
}

fn check(op: &'static str, status: cublas_sys::cublasStatus_t) -> Result<(), CudaError> {
    if status == cublas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(CudaError::Blas {
            op,
            source: CublasError(status),
        })
    }
}

fn len_i32(op: &'static str, n: usize) -> Result<i32, CudaError> {
    i32::try_from(n).map_err(|_| CudaError::TooLarge {
        op,
        n,
        library: "cuBLAS",
    })
}

/// The argument mapping checked without a GPU: column-major products as
/// cuBLAS defines them (`gemm`: `C = op(A) op(B)`, `op(A)[i, l]` at
/// `A[i + l * lda]`, or `A[l + i * lda]` transposed), with cuBLAS's
/// checks of the leading dimensions, fed what `Gpu::gemm` and `Gpu::gemv`
/// pass, must give the row-major CPU product.
#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{ColumnMajorGemm, ColumnMajorGemv};
    use crate::cpu::{Transpose, gemm, gemv};

    fn at(t: Transpose, ld: usize, row: usize, col: usize) -> usize {
        match t {
            Transpose::No => row + col * ld,
            Transpose::Yes => col + row * ld,
        }
    }

    /// cuBLAS `gemm` on the host, refusing what cuBLAS refuses.
    fn cublas_gemm(g: &ColumnMajorGemm, first: &[f64], second: &[f64], out: &mut [f64]) {
        let rows = |t: Transpose, r: usize, c: usize| if t == Transpose::No { r } else { c };
        assert!(
            g.ld_first >= rows(g.trans_first, g.m, g.k).max(1),
            "lda {g:?}"
        );
        assert!(
            g.ld_second >= rows(g.trans_second, g.k, g.n).max(1),
            "ldb {g:?}"
        );
        assert!(g.ldc >= g.m.max(1), "ldc {g:?}");
        for j in 0..g.n {
            for i in 0..g.m {
                let sum: f64 = (0..g.k)
                    .map(|l| {
                        first[at(g.trans_first, g.ld_first, i, l)]
                            * second[at(g.trans_second, g.ld_second, l, j)]
                    })
                    .sum();
                out[i + j * g.ldc] = sum;
            }
        }
    }

    /// cuBLAS `gemv` (`y = op(A) x`, `A` rows x cols, lda = rows) on the host.
    fn cublas_gemv(g: &ColumnMajorGemv, a: &[f64], x: &[f64], y: &mut [f64]) {
        let (out, inner) = match g.trans {
            Transpose::No => (g.rows, g.cols),
            Transpose::Yes => (g.cols, g.rows),
        };
        assert_eq!((x.len(), y.len()), (inner, out), "{g:?}");
        for (i, yi) in y.iter_mut().enumerate() {
            *yi = (0..inner)
                .map(|l| a[at(g.trans, g.rows, i, l)] * x[l])
                .sum();
        }
    }

    fn values(n: usize, seed: u64) -> Vec<f64> {
        (0..n as u64)
            .map(|i| ((i * 7919 + seed * 104_729) % 97) as f64 / 8.0 - 6.0)
            .collect()
    }

    fn transpose() -> impl Strategy<Value = Transpose> {
        prop_oneof![Just(Transpose::No), Just(Transpose::Yes)]
    }

    proptest! {
        #[test]
        fn gemm_arguments_give_the_row_major_product(
            ta in transpose(), tb in transpose(),
            m in 1usize..9, n in 1usize..9, k in 1usize..9, seed in 0u64..1000,
        ) {
            let (a, b) = (values(m * k, seed), values(k * n, seed + 1));
            let mut want = vec![0.0; m * n];
            gemm(ta, tb, m, n, k, 1.0, &a, &b, 0.0, &mut want);
            let mut got = vec![f64::NAN; m * n];
            cublas_gemm(&ColumnMajorGemm::for_row_major(ta, tb, m, n, k), &b, &a, &mut got);
            prop_assert_eq!(got, want);
        }

        #[test]
        fn gemv_arguments_give_the_row_major_product(
            t in transpose(), m in 1usize..9, n in 1usize..9, seed in 0u64..1000,
        ) {
            let (xn, yn) = if t == Transpose::No { (n, m) } else { (m, n) };
            let (a, x) = (values(m * n, seed), values(xn, seed + 1));
            let mut want = vec![0.0; yn];
            gemv(t, m, n, 1.0, &a, &x, 0.0, &mut want);
            let mut got = vec![f64::NAN; yn];
            cublas_gemv(&ColumnMajorGemv::for_row_major(t, m, n), &a, &x, &mut got);
            prop_assert_eq!(got, want);
        }
    }

    /// LeNet's products, as the layers ask them: ip1 forward (`x W^T`),
    /// its weight gradient (`dy^T x`) and the convolution's input gradient
    /// (`W^T dy`).
    #[test]
    fn lenet_shapes_map_to_valid_cublas_arguments() {
        for (ta, tb, m, n, k) in [
            (Transpose::No, Transpose::Yes, 64, 500, 800),
            (Transpose::Yes, Transpose::No, 500, 800, 64),
            (Transpose::Yes, Transpose::No, 500, 64 * 64, 50),
        ] {
            let (a, b) = (values(m * k, 3), values(k * n, 4));
            let mut want = vec![0.0; m * n];
            gemm(ta, tb, m, n, k, 1.0, &a, &b, 0.0, &mut want);
            let mut got = vec![0.0; m * n];
            cublas_gemm(
                &ColumnMajorGemm::for_row_major(ta, tb, m, n, k),
                &b,
                &a,
                &mut got,
            );
            assert_eq!(got, want, "{ta:?} {tb:?} {m}x{n}x{k}");
        }
    }
}
