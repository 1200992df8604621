// BatchNorm's forward pass with global statistics on the GPU, as
// batch_norm/mod.rs computes it on the CPU: stats holds each channel's
// mean, then each channel's deviation sqrt(var + eps).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// y = (x - mean[c]) / std[c], c = (i / spatial) % channels.
extern "C" __global__ void batch_norm_global_f32(long long n, int channels, long long spatial,
                                                 const float* x, const float* stats, float* y) {
    GRID_STRIDE(i, n) {
        int c = (int)((i / spatial) % channels);
        y[i] = (x[i] - stats[c]) / stats[channels + c];
    }
}

// The same in place: y holds x.
extern "C" __global__ void batch_norm_global_inplace_f32(long long n, int channels,
                                                         long long spatial, const float* stats,
                                                         float* y) {
    GRID_STRIDE(i, n) {
        int c = (int)((i / spatial) % channels);
        y[i] = (y[i] - stats[c]) / stats[channels + c];
    }
}
