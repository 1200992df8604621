// Scale's and Bias's forward passes on the GPU, as scale/mod.rs computes
// them on the CPU: element i is scaled by the factor of (i / inner) % dim
// where there is one (not for Bias), then shifted by that bias where
// there is one.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// y = x (* scale[d] when has_scale) (+ bias[d] when has_bias).
extern "C" __global__ void scale_forward_f32(long long n, long long dim, long long inner,
                                             const float* x, const float* scale, int has_scale,
                                             const float* bias, int has_bias, float* y) {
    GRID_STRIDE(i, n) {
        long long d = (i / inner) % dim;
        float v = has_scale ? x[i] * scale[d] : x[i];
        y[i] = has_bias ? v + bias[d] : v;
    }
}

// The same in place: y holds x.
extern "C" __global__ void scale_forward_inplace_f32(long long n, long long dim, long long inner,
                                                     const float* scale, int has_scale,
                                                     const float* bias, int has_bias, float* y) {
    GRID_STRIDE(i, n) {
        long long d = (i / inner) % dim;
        float v = has_scale ? y[i] * scale[d] : y[i];
        y[i] = has_bias ? v + bias[d] : v;
    }
}
