// cuBLAS on the CPU, for the CPU CUDA driver (see driver.cpp).
//
// Column-major, as cuBLAS. Each operand's extent (the elements its leading
// dimension and size reach) must lie in its allocation.

#include "stream.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace cpu_cuda;

namespace {

enum : int { BLAS_SUCCESS = 0, BLAS_NOT_INITIALIZED = 1, BLAS_INVALID_VALUE = 7 };

struct BlasHandle {
    int pointer_mode = 0;     // host
    void* stream = nullptr;   // cublasSetStream's; null: the default stream
};

void* stream_of(void* h) { return static_cast<BlasHandle*>(h)->stream; }

int blas_refuse(const std::string& why) {
    std::fprintf(stderr, "cpu cuBLAS: %s\n", why.c_str());
    return BLAS_INVALID_VALUE;
}

// Elements a column-major rows x cols operand with leading dimension ld
// reaches.
size_t extent(long rows, long cols, long ld) {
    if (rows == 0 || cols == 0) return 0;
    return size_t(ld) * size_t(cols - 1) + size_t(rows);
}

template <typename T>
bool operand(const T* p, size_t elements, const char* op, const char* what) {
    return device_range(DevPtr(uintptr_t(p)), elements * sizeof(T), op, what);
}

template <typename T>
int gemm(void* h, int ta, int tb, int m, int n, int k, const T* alpha, const T* a, int lda,
         const T* b, int ldb, const T* beta, T* c, int ldc) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    count(Counter::Blas);
    if (static_cast<BlasHandle*>(h)->pointer_mode != 0) return blas_refuse("gemm: device pointer mode");
    if (ta < 0 || ta > 2 || tb < 0 || tb > 2 || m < 0 || n < 0 || k < 0) {
        return blas_refuse("gemm: a transpose or size out of range");
    }
    int a_rows = ta == 0 ? m : k, a_cols = ta == 0 ? k : m;
    int b_rows = tb == 0 ? k : n, b_cols = tb == 0 ? n : k;
    if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m)) {
        return blas_refuse("gemm: m " + std::to_string(m) + " n " + std::to_string(n) + " k " +
                           std::to_string(k) + " with lda " + std::to_string(lda) + " ldb " +
                           std::to_string(ldb) + " ldc " + std::to_string(ldc) +
                           ": a leading dimension is below its operand's rows");
    }
    if (m == 0 || n == 0) return BLAS_SUCCESS;
    if ((k > 0 && (!operand(a, extent(a_rows, a_cols, lda), "gemm", "A") ||
                   !operand(b, extent(b_rows, b_cols, ldb), "gemm", "B"))) ||
        !operand(c, extent(m, n, ldc), "gemm", "C")) {
        return BLAS_INVALID_VALUE;
    }
    T al = *alpha, be = *beta;
    enqueue(stream_of(h), [=] {
        // op(A) as a contiguous column-major m x k, and alpha op(B)'s
        // column j: every inner loop then runs along memory.
        std::vector<T> at;
        const T* a_cols = a;
        long a_ld = lda;
        if (ta != 0) {
            at.resize(size_t(m) * size_t(k));
            for (int p = 0; p < k; ++p)
                for (int i = 0; i < m; ++i) at[size_t(p) * m + i] = a[size_t(i) * lda + p];
            a_cols = at.data();
            a_ld = m;
        }
        std::vector<T> bj(static_cast<size_t>(k));
        for (int j = 0; j < n; ++j) {
            for (int p = 0; p < k; ++p) bj[p] = al * (tb == 0 ? b[size_t(j) * ldb + p] : b[size_t(p) * ldb + j]);
            T* cj = c + size_t(j) * ldc;
            // beta 0 overwrites without reading, as cuBLAS: C may hold NaNs.
            for (int i = 0; i < m; ++i) cj[i] = be == T(0) ? T(0) : be * cj[i];
            for (int p = 0; p < k; ++p) {
                const T* ap = a_cols + size_t(p) * a_ld;
                T s = bj[p];
                for (int i = 0; i < m; ++i) cj[i] += ap[i] * s;
            }
        }
    });
    return BLAS_SUCCESS;
}

template <typename T>
int gemv(void* h, int t, int m, int n, const T* alpha, const T* a, int lda, const T* x, int incx,
         const T* beta, T* y, int incy) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    count(Counter::Blas);
    if (t < 0 || t > 2 || m < 0 || n < 0 || lda < std::max(1, m) || incx != 1 || incy != 1) {
        return blas_refuse("gemv: m " + std::to_string(m) + " n " + std::to_string(n) + " lda " +
                           std::to_string(lda) + ": out of range (or a stride other than 1)");
    }
    int xn = t == 0 ? n : m, yn = t == 0 ? m : n;
    if (m == 0 || n == 0) return BLAS_SUCCESS;
    if (!operand(a, extent(m, n, lda), "gemv", "A") || !operand(x, size_t(xn), "gemv", "x") ||
        !operand(y, size_t(yn), "gemv", "y")) {
        return BLAS_INVALID_VALUE;
    }
    T al = *alpha, be = *beta;
    enqueue(stream_of(h), [=] {
        for (int i = 0; i < yn; ++i) {
            T s = T(0);
            for (int j = 0; j < xn; ++j) {
                s += (t == 0 ? a[size_t(j) * lda + i] : a[size_t(i) * lda + j]) * x[j];
            }
            y[i] = al * s + (be == T(0) ? T(0) : be * y[i]);
        }
    });
    return BLAS_SUCCESS;
}

template <typename T>
int axpy(void* h, int n, const T* alpha, const T* x, int incx, T* y, int incy) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    count(Counter::Blas);
    if (n < 0 || incx != 1 || incy != 1) return blas_refuse("axpy: n < 0 or a stride other than 1");
    if (n == 0) return BLAS_SUCCESS;
    if (!operand(x, size_t(n), "axpy", "x") || !operand(y, size_t(n), "axpy", "y")) return BLAS_INVALID_VALUE;
    T al = *alpha;
    enqueue(stream_of(h), [=] {
        for (int i = 0; i < n; ++i) y[i] += al * x[i];
    });
    return BLAS_SUCCESS;
}

template <typename T>
int scal(void* h, int n, const T* alpha, T* x, int incx) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    count(Counter::Blas);
    if (n < 0 || incx != 1) return blas_refuse("scal: n < 0 or a stride other than 1");
    if (n == 0) return BLAS_SUCCESS;
    if (!operand(x, size_t(n), "scal", "x")) return BLAS_INVALID_VALUE;
    T al = *alpha;
    enqueue(stream_of(h), [=] {
        for (int i = 0; i < n; ++i) x[i] *= al;
    });
    return BLAS_SUCCESS;
}

// dot and asum give their result to a host scalar: cuBLAS returns once
// it is written.
template <typename T>
int dot(void* h, int n, const T* x, int incx, const T* y, int incy, T* result) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    count(Counter::Blas);
    if (n < 0 || incx != 1 || incy != 1) return blas_refuse("dot: n < 0 or a stride other than 1");
    if (n > 0 && (!operand(x, size_t(n), "dot", "x") || !operand(y, size_t(n), "dot", "y"))) {
        return BLAS_INVALID_VALUE;
    }
    count(Counter::HostWait);
    flush(stream_of(h));
    T s = T(0);
    for (int i = 0; i < n; ++i) s += x[i] * y[i];
    *result = s;
    return BLAS_SUCCESS;
}

template <typename T>
int asum(void* h, int n, const T* x, int incx, T* result) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    count(Counter::Blas);
    if (n < 0 || incx != 1) return blas_refuse("asum: n < 0 or a stride other than 1");
    if (n > 0 && !operand(x, size_t(n), "asum", "x")) return BLAS_INVALID_VALUE;
    count(Counter::HostWait);
    flush(stream_of(h));
    T s = T(0);
    for (int i = 0; i < n; ++i) s += std::fabs(x[i]);
    *result = s;
    return BLAS_SUCCESS;
}

}  // namespace

extern "C" {

int cublasCreate_v2(void** handle) { *handle = new BlasHandle; return BLAS_SUCCESS; }
int cublasDestroy_v2(void* handle) {
    flush(stream_of(handle));
    delete static_cast<BlasHandle*>(handle);
    return BLAS_SUCCESS;
}
int cublasSetStream_v2(void* handle, void* stream) {
    static_cast<BlasHandle*>(handle)->stream = stream;
    return BLAS_SUCCESS;
}
int cublasSetPointerMode_v2(void* h, int mode) { static_cast<BlasHandle*>(h)->pointer_mode = mode; return BLAS_SUCCESS; }
int cublasSetMathMode(void*, int) { return BLAS_SUCCESS; }

int cublasSgemm_v2(void* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* a, int lda,
                   const float* b, int ldb, const float* beta, float* c, int ldc) {
    return gemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
int cublasDgemm_v2(void* h, int ta, int tb, int m, int n, int k, const double* alpha, const double* a,
                   int lda, const double* b, int ldb, const double* beta, double* c, int ldc) {
    return gemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
int cublasSgemv_v2(void* h, int t, int m, int n, const float* alpha, const float* a, int lda, const float* x,
                   int incx, const float* beta, float* y, int incy) {
    return gemv(h, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
int cublasDgemv_v2(void* h, int t, int m, int n, const double* alpha, const double* a, int lda,
                   const double* x, int incx, const double* beta, double* y, int incy) {
    return gemv(h, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
int cublasSaxpy_v2(void* h, int n, const float* alpha, const float* x, int incx, float* y, int incy) {
    return axpy(h, n, alpha, x, incx, y, incy);
}
int cublasDaxpy_v2(void* h, int n, const double* alpha, const double* x, int incx, double* y, int incy) {
    return axpy(h, n, alpha, x, incx, y, incy);
}
int cublasSscal_v2(void* h, int n, const float* alpha, float* x, int incx) { return scal(h, n, alpha, x, incx); }
int cublasDscal_v2(void* h, int n, const double* alpha, double* x, int incx) { return scal(h, n, alpha, x, incx); }
int cublasSdot_v2(void* h, int n, const float* x, int incx, const float* y, int incy, float* r) {
    return dot(h, n, x, incx, y, incy, r);
}
int cublasDdot_v2(void* h, int n, const double* x, int incx, const double* y, int incy, double* r) {
    return dot(h, n, x, incx, y, incy, r);
}
int cublasSasum_v2(void* h, int n, const float* x, int incx, float* r) { return asum(h, n, x, incx, r); }
int cublasDasum_v2(void* h, int n, const double* x, int incx, double* r) { return asum(h, n, x, incx, r); }

}  // extern "C"

