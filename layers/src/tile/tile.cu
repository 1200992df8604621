// Tile on the GPU, as tile/mod.rs does on the CPU: each block of `inner`
// values copied `tiles` times in a row; backward adds the copies'
// gradients in order.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// One thread an output value.
extern "C" __global__ void tile_forward_f32(long long n, long long inner, long long tiles,
                                            const float* x, float* y) {
    GRID_STRIDE(p, n) {
        y[p] = x[p / (inner * tiles) * inner + p % inner];
    }
}

// One thread an input value: its copies' gradients, first to last.
extern "C" __global__ void tile_backward_f32(long long n, long long inner, long long tiles,
                                             const float* dy, float* dx) {
    GRID_STRIDE(q, n) {
        const float* copies = dy + q / inner * inner * tiles + q % inner;
        float sum = 0.0f;
        for (long long t = 0; t < tiles; ++t) {
            sum += copies[t * inner];
        }
        dx[q] = sum;
    }
}
