// Caffe's hand-written GPU kernels (math_functions.cu), for float and
// double: grid-stride loops, launched with 512 threads per block.
// Compiled at run time by NVRTC; the names are extern "C" so the host
// finds them as `<op>_f32` / `<op>_f64`.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

template <typename T> __device__ __forceinline__ T bf_exp(T x);
template <> __device__ __forceinline__ float bf_exp<float>(float x) { return expf(x); }
template <> __device__ __forceinline__ double bf_exp<double>(double x) { return exp(x); }

template <typename T> __device__ __forceinline__ T bf_log(T x);
template <> __device__ __forceinline__ float bf_log<float>(float x) { return logf(x); }
template <> __device__ __forceinline__ double bf_log<double>(double x) { return log(x); }

template <typename T> __device__ __forceinline__ T bf_pow(T x, T p);
template <> __device__ __forceinline__ float bf_pow<float>(float x, float p) { return powf(x, p); }
template <> __device__ __forceinline__ double bf_pow<double>(double x, double p) { return pow(x, p); }

template <typename T> __device__ __forceinline__ T bf_sqrt(T x);
template <> __device__ __forceinline__ float bf_sqrt<float>(float x) { return sqrtf(x); }
template <> __device__ __forceinline__ double bf_sqrt<double>(double x) { return sqrt(x); }

template <typename T> __device__ __forceinline__ T bf_abs(T x);
template <> __device__ __forceinline__ float bf_abs<float>(float x) { return fabsf(x); }
template <> __device__ __forceinline__ double bf_abs<double>(double x) { return fabs(x); }

// signbit as 0 or 1 from the bits, so -0.0 and negative NaN give 1.
template <typename T> __device__ __forceinline__ T bf_sgnbit(T x);
template <> __device__ __forceinline__ float bf_sgnbit<float>(float x) { return __float_as_int(x) < 0 ? 1.0f : 0.0f; }
template <> __device__ __forceinline__ double bf_sgnbit<double>(double x) { return __double_as_longlong(x) < 0 ? 1.0 : 0.0; }

// Caffe's sign: (0 < x) - (x < 0); 0 for +-0 and NaN.
template <typename T> __device__ __forceinline__ T bf_sign(T x) {
    return (T)((T(0) < x) - (x < T(0)));
}

#define UNARY(name, expr)                                                              \
    template <typename T> __device__ void name##_impl(long long n, const T* a, T* y) { \
        GRID_STRIDE(i, n) { T v = a[i]; y[i] = (expr); }                               \
    }                                                                                  \
    extern "C" __global__ void name##_f32(long long n, const float* a, float* y) {     \
        name##_impl<float>(n, a, y);                                                   \
    }                                                                                  \
    extern "C" __global__ void name##_f64(long long n, const double* a, double* y) {   \
        name##_impl<double>(n, a, y);                                                  \
    }

#define BINARY(name, op)                                                                             \
    template <typename T> __device__ void name##_impl(long long n, const T* a, const T* b, T* y) {   \
        GRID_STRIDE(i, n) { y[i] = a[i] op b[i]; }                                                   \
    }                                                                                                \
    extern "C" __global__ void name##_f32(long long n, const float* a, const float* b, float* y) {   \
        name##_impl<float>(n, a, b, y);                                                              \
    }                                                                                                \
    extern "C" __global__ void name##_f64(long long n, const double* a, const double* b, double* y) {\
        name##_impl<double>(n, a, b, y);                                                             \
    }

UNARY(abs, bf_abs<T>(v))
UNARY(fabs, bf_abs<T>(v))
UNARY(exp, bf_exp<T>(v))
UNARY(log, bf_log<T>(v))
UNARY(sqrt, bf_sqrt<T>(v))
UNARY(sqr, v * v)
UNARY(sign, bf_sign<T>(v))
UNARY(sgnbit, bf_sgnbit<T>(v))

BINARY(add, +)
BINARY(sub, -)
BINARY(mul, *)
BINARY(div, /)

template <typename T> __device__ void set_impl(long long n, T alpha, T* y) {
    GRID_STRIDE(i, n) { y[i] = alpha; }
}
extern "C" __global__ void set_f32(long long n, float alpha, float* y) { set_impl<float>(n, alpha, y); }
extern "C" __global__ void set_f64(long long n, double alpha, double* y) { set_impl<double>(n, alpha, y); }

template <typename T> __device__ void add_scalar_impl(long long n, T alpha, T* y) {
    GRID_STRIDE(i, n) { y[i] += alpha; }
}
extern "C" __global__ void add_scalar_f32(long long n, float alpha, float* y) { add_scalar_impl<float>(n, alpha, y); }
extern "C" __global__ void add_scalar_f64(long long n, double alpha, double* y) { add_scalar_impl<double>(n, alpha, y); }

template <typename T> __device__ void powx_impl(long long n, const T* a, T p, T* y) {
    GRID_STRIDE(i, n) { y[i] = bf_pow<T>(a[i], p); }
}
extern "C" __global__ void powx_f32(long long n, const float* a, float p, float* y) { powx_impl<float>(n, a, p, y); }
extern "C" __global__ void powx_f64(long long n, const double* a, double p, double* y) { powx_impl<double>(n, a, p, y); }
