// Dropout on the GPU: keep[i] (0 or 1, drawn by cuRAND) times the scale.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// y = x * keep * scale (in place when x == y); the same for gradients.
extern "C" __global__ void dropout_f32(long long n, const unsigned int* keep, float scale,
                                       const float* x, float* y) {
    GRID_STRIDE(i, n) { y[i] = keep[i] == 1u ? x[i] * scale : 0.0f; }
}

extern "C" __global__ void dropout_inplace_f32(long long n, const unsigned int* keep, float scale,
                                               float* y) {
    GRID_STRIDE(i, n) { y[i] = keep[i] == 1u ? y[i] * scale : 0.0f; }
}

// ENet's spatial dropout: one keep (0 or 1, drawn on the host from Caffe's
// generator) for each image's channel, a map of `plane` values; y = x *
// keep * scale in two roundings, as NumPy's float32 `x * keep * scale`
// (a dropped negative value is -0). The same for gradients.
extern "C" __global__ void spatial_dropout_f32(long long n, long long plane,
                                               const unsigned int* keep, float scale,
                                               const float* x, float* y) {
    GRID_STRIDE(i, n) { y[i] = __fmul_rn(__fmul_rn(x[i], (float)keep[i / plane]), scale); }
}

extern "C" __global__ void spatial_dropout_inplace_f32(long long n, long long plane,
                                                       const unsigned int* keep, float scale,
                                                       float* y) {
    GRID_STRIDE(i, n) { y[i] = __fmul_rn(__fmul_rn(y[i], (float)keep[i / plane]), scale); }
}
