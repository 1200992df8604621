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

// Batch statistics, with the per-channel sums made by Gpu::add_sums in
// between: the means from the sums of x, then the terms of the variance.

// stats[ch] = sums[ch] / count: the means.
extern "C" __global__ void batch_norm_means_f32(int channels, float count, const float* sums,
                                                float* stats) {
    GRID_STRIDE(ch, channels) { stats[ch] = sums[ch] / count; }
}

// out[i] = (x[i] - mean)^2 in its channel.
extern "C" __global__ void batch_norm_square_dev_f32(long long n, int channels, long long spatial,
                                                     const float* x, const float* stats,
                                                     float* out) {
    GRID_STRIDE(i, n) {
        float d = x[i] - stats[(int)((i / spatial) % channels)];
        out[i] = d * d;
    }
}

// The variance from its sums: stats[channels + ch] = sqrt(var + eps), and
// the running sums Caffe keeps (the means and the unbiased variances, each
// plus maf times the last, and their factor times maf plus 1).
extern "C" __global__ void batch_norm_finish_f32(int channels, float count, double eps,
                                                 double maf, double correction,
                                                 const float* square_sums, float* stats,
                                                 float* run_mean, float* run_var,
                                                 float* run_factor) {
    GRID_STRIDE(ch, channels) {
        double var = (double)(square_sums[ch] / count);
        stats[channels + ch] = (float)sqrt(var + eps);
        run_mean[ch] = (float)((double)stats[ch] + maf * (double)run_mean[ch]);
        run_var[ch] = (float)(correction * var + maf * (double)run_var[ch]);
        if (ch == 0) run_factor[0] = (float)((double)run_factor[0] * maf + 1.0);
    }
}

// Batch statistics: dx = (dy - mean(dy) - xnorm mean(dy xnorm)) / std, the
// means per channel from sums (those of dy, then of dy xnorm).
__device__ float batch_norm_grad(long long i, int channels, long long spatial, float count,
                                 float dy, const float* xnorm, const float* sums,
                                 const float* stats) {
    int ch = (int)((i / spatial) % channels);
    return (dy - sums[ch] / count - xnorm[i] * (sums[channels + ch] / count)) /
           stats[channels + ch];
}

extern "C" __global__ void batch_norm_backward_f32(long long n, int channels, long long spatial,
                                                   float count, const float* dy,
                                                   const float* xnorm, const float* sums,
                                                   const float* stats, float* dx) {
    GRID_STRIDE(i, n) {
        dx[i] = batch_norm_grad(i, channels, spatial, count, dy[i], xnorm, sums, stats);
    }
}

// The same in place: d holds dy and takes dx.
extern "C" __global__ void batch_norm_backward_inplace_f32(long long n, int channels,
                                                           long long spatial, float count,
                                                           const float* xnorm,
                                                           const float* sums,
                                                           const float* stats, float* d) {
    GRID_STRIDE(i, n) {
        d[i] = batch_norm_grad(i, channels, spatial, count, d[i], xnorm, sums, stats);
    }
}

// Global statistics: dx = dy / std (in place when dy is dx).
extern "C" __global__ void batch_norm_backward_global_f32(long long n, int channels,
                                                          long long spatial, const float* stats,
                                                          float* d) {
    GRID_STRIDE(i, n) { d[i] = d[i] / stats[channels + (int)((i / spatial) % channels)]; }
}
