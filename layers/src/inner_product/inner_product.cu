// InnerProduct's bias on the GPU, added to each row (its gradient is
// Gpu::add_sums over the output gradient's columns).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// y[row, j] += bias[j] for a (rows, n) matrix of `total` values.
extern "C" __global__ void add_bias_rows_f32(long long total, int n, const float* bias, float* y) {
    GRID_STRIDE(i, total) { y[i] += bias[i % n]; }
}
