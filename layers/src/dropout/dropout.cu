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
