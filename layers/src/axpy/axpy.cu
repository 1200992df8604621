// Axpy on the GPU, as axpy/mod.rs computes it on the CPU, in double with
// each result rounded to float once: out = a[item, channel] * x + y.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

extern "C" __global__ void axpy_f32(long long n, long long plane, const float* a, const float* x,
                                    const float* y, float* out) {
    GRID_STRIDE(i, n) { out[i] = (float)((double)a[i / plane] * x[i] + y[i]); }
}

// dx = a * dy (one rounding: the product of two floats is exact in double).
extern "C" __global__ void axpy_backward_x_f32(long long n, long long plane, const float* a,
                                               const float* dy, float* dx) {
    GRID_STRIDE(i, n) { dx[i] = (float)((double)a[i / plane] * dy[i]); }
}

// da[k] = sum over its plane of x dy, in double in the plane's order.
extern "C" __global__ void axpy_backward_a_f32(long long gates, long long plane, const float* x,
                                               const float* dy, float* da) {
    GRID_STRIDE(k, gates) {
        double sum = 0.0;
        for (long long p = 0; p < plane; ++p) sum += (double)x[k * plane + p] * dy[k * plane + p];
        da[k] = (float)sum;
    }
}
