// Element-wise activations on the GPU, as activation/mod.rs: kind 0 ReLU,
// 1 Sigmoid, 2 TanH; the slope from the output (and, for ReLU, its sign).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

__device__ float activate(int kind, float x) {
    // ReLU as Caffe's CPU sums it, max(x, 0) + 0 * min(x, 0): NaN stays
    // NaN, -inf becomes NaN, -0 stays -0 (activation/mod.rs).
    if (kind == 0) return (x < 0.0f ? 0.0f : x) + 0.0f * (0.0f < x ? 0.0f : x);
    if (kind == 1) return 1.0f / (1.0f + expf(-x));
    return tanhf(x);
}

// The slope at input x whose output is y; a zero slope gives +0.
__device__ float times_slope(int kind, float g, float x, float y) {
    float s = kind == 0 ? (x > 0.0f ? 1.0f : 0.0f) : kind == 1 ? y * (1.0f - y) : 1.0f - y * y;
    return s == 0.0f ? 0.0f : g * s;
}

extern "C" __global__ void activate_f32(long long n, int kind, const float* x, float* y) {
    GRID_STRIDE(i, n) { y[i] = activate(kind, x[i]); }
}

extern "C" __global__ void activate_inplace_f32(long long n, int kind, float* y) {
    GRID_STRIDE(i, n) { y[i] = activate(kind, y[i]); }
}

// Out of place: dx = dy * f'(x).
extern "C" __global__ void activate_backward_f32(long long n, int kind, const float* x,
                                                 const float* y, const float* dy, float* dx) {
    GRID_STRIDE(i, n) { dx[i] = times_slope(kind, dy[i], x[i], y[i]); }
}

// In place: the data holds y = f(x), and ReLU's sign is y's; the diff is
// rewritten.
extern "C" __global__ void activate_backward_inplace_f32(long long n, int kind, const float* y,
                                                         float* d) {
    GRID_STRIDE(i, n) { d[i] = times_slope(kind, d[i], y[i], y[i]); }
}
