// The BN forks' forward pass on the GPU with fixed statistics, as
// bn/mod.rs computes it on the CPU, in double with each result rounded to
// float once: y = (x - mean) / sqrt(var + eps) * slope + bias per channel
// (PSPNet's moving statistics), or x * scale + shift (SegNet's
// INFERENCE, `has_stats` 0).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

extern "C" __global__ void bn_forward_f32(long long n, long long channels, long long plane,
                                          const float* x, const float* slope, const float* bias,
                                          const float* mean, const float* var, double eps,
                                          int has_stats, float* y) {
    GRID_STRIDE(i, n) {
        long long c = (i / plane) % channels;
        double norm = has_stats ? ((double)x[i] - mean[c]) * (1.0 / sqrt((double)var[c] + eps))
                                : (double)x[i];
        y[i] = (float)(norm * slope[c] + bias[c]);
    }
}
