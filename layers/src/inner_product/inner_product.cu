// InnerProduct's bias on the GPU: added to each row, and its gradient as
// the column sums of the output's gradient.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// y[row, j] += bias[j] for a (rows, n) matrix of `total` values.
extern "C" __global__ void add_bias_rows_f32(long long total, int n, const float* bias, float* y) {
    GRID_STRIDE(i, total) { y[i] += bias[i % n]; }
}

// sums[j] += sum over rows of m[row, j] for a (rows, cols) matrix.
extern "C" __global__ void col_sums_add_f32(long long rows, long long cols, const float* m,
                                            float* sums) {
    GRID_STRIDE(j, cols) {
        float sum = 0.0f;
        for (long long r = 0; r < rows; ++r) sum += m[r * cols + j];
        sums[j] += sum;
    }
}
