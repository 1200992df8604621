//! BLAS level 2 and 3: row-major gemm and gemv with Caffe's conventions.
//!
//! gemm runs on `matrixmultiply`, a maintained pure-Rust kernel with
//! runtime AVX/FMA dispatch and its own thread pool for large products; no
//! system BLAS is needed to build.

use crate::Real;

/// Whether an operand is used as stored or transposed (CBLAS `CblasNoTrans`
/// / `CblasTrans`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transpose {
    /// Use the matrix as stored.
    No,
    /// Use the transpose of the stored matrix.
    Yes,
}

/// Row-major `C = alpha * op(A) * op(B) + beta * C` (Caffe
/// `caffe_cpu_gemm`), with `op(A)` of `m x k`, `op(B)` of `k x n` and `C` of
/// `m x n`; leading dimensions are Caffe's (`lda = k` or `m`, `ldb = n` or
/// `k`, `ldc = n`). When `beta == 0`, `C` is never read, so it may hold NaN.
///
/// ```
/// use blob_kernels::cpu::{gemm, Transpose};
/// let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2x3
/// let b = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]; // 3x4
/// let mut c = [0.0f32; 8];
/// gemm(Transpose::No, Transpose::No, 2, 4, 3, 1.0, &a, &b, 0.0, &mut c);
/// assert_eq!(c, [38.0, 44.0, 50.0, 56.0, 83.0, 98.0, 113.0, 128.0]);
/// ```
///
/// # Panics
/// If a slice is shorter than its matrix.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn gemm<T: Real>(
    trans_a: Transpose,
    trans_b: Transpose,
    m: usize,
    n: usize,
    k: usize,
    alpha: T,
    a: &[T],
    b: &[T],
    beta: T,
    c: &mut [T],
) {
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "gemm: {m}x{k} * {k}x{n} needs A, B, C of {}, {}, {} elements, got {}, {}, {}",
        m * k,
        k * n,
        m * n,
        a.len(),
        b.len(),
        c.len()
    );
    let c = &mut c[..m * n];
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        scale_c(beta, c);
        return;
    }
    let (rsa, csa) = match trans_a {
        Transpose::No => (k, 1),
        Transpose::Yes => (1, m),
    };
    let (rsb, csb) = match trans_b {
        Transpose::No => (n, 1),
        Transpose::Yes => (1, k),
    };
    T::matmul(
        m,
        k,
        n,
        alpha,
        &a[..m * k],
        [rsa, csa],
        &b[..k * n],
        [rsb, csb],
        beta,
        c,
        [n, 1],
    );
}

fn scale_c<T: Real>(beta: T, c: &mut [T]) {
    if beta == T::ZERO {
        c.fill(T::ZERO);
    } else {
        super::scal(beta, c);
    }
}

/// Row-major `y = alpha * op(A) * x + beta * y` (Caffe `caffe_cpu_gemv`),
/// where `A` is always stored `m x n`: with [`Transpose::No`] `x` has `n`
/// and `y` has `m` elements, with [`Transpose::Yes`] the reverse. When
/// `beta == 0`, `y` is never read.
///
/// ```
/// use blob_kernels::cpu::{gemv, Transpose};
/// let a = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2x3
/// let mut y = [0.0f64; 2];
/// gemv(Transpose::No, 2, 3, 1.0, &a, &[1.0, 2.0, 3.0], 0.0, &mut y);
/// assert_eq!(y, [14.0, 32.0]);
/// let mut yt = [0.0f64; 3];
/// gemv(Transpose::Yes, 2, 3, 1.0, &a, &[1.0, 2.0], 0.0, &mut yt);
/// assert_eq!(yt, [9.0, 12.0, 15.0]);
/// ```
///
/// # Panics
/// If a slice does not have its matrix's or vector's length.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn gemv<T: Real>(
    trans: Transpose,
    m: usize,
    n: usize,
    alpha: T,
    a: &[T],
    x: &[T],
    beta: T,
    y: &mut [T],
) {
    let (xn, yn) = match trans {
        Transpose::No => (n, m),
        Transpose::Yes => (m, n),
    };
    assert!(
        a.len() >= m * n && x.len() == xn && y.len() == yn,
        "gemv: A {m}x{n} with op {trans:?} needs A, x, y of {}, {xn}, {yn} elements, got {}, {}, {}",
        m * n,
        a.len(),
        x.len(),
        y.len()
    );
    if n == 0 || m == 0 {
        scale_c(beta, y);
        return;
    }
    match trans {
        Transpose::No => {
            for (yi, row) in y.iter_mut().zip(a.chunks_exact(n)) {
                let d = alpha * super::dot(row, x);
                *yi = if beta == T::ZERO { d } else { d + beta * *yi };
            }
        }
        Transpose::Yes => {
            scale_c(beta, y);
            for (&xi, row) in x.iter().zip(a.chunks_exact(n)) {
                super::axpy(alpha * xi, row, y);
            }
        }
    }
}
