// PReLU on the GPU, as prelu/mod.rs computes it on the CPU: element i
// belongs to channel (i / dim) % channels (channels 1: one shared slope).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// y = x > 0 ? x : slope[c] * x.
extern "C" __global__ void prelu_forward_f32(long long n, int channels, long long dim,
                                             const float* x, const float* slope, float* y) {
    GRID_STRIDE(i, n) {
        int c = (int)((i / dim) % channels);
        float v = x[i];
        y[i] = v > 0.0f ? v : v * slope[c];
    }
}

// dx = dy * (x > 0 ? 1 : slope[c]).
extern "C" __global__ void prelu_backward_f32(long long n, int channels, long long dim,
                                              const float* x, const float* slope, const float* dy,
                                              float* dx) {
    GRID_STRIDE(i, n) {
        int c = (int)((i / dim) % channels);
        dx[i] = x[i] > 0.0f ? dy[i] : dy[i] * slope[c];
    }
}

// The same in place: d holds dy and receives dx.
extern "C" __global__ void prelu_backward_inplace_f32(long long n, int channels, long long dim,
                                                      const float* x, const float* slope,
                                                      float* d) {
    GRID_STRIDE(i, n) {
        int c = (int)((i / dim) % channels);
        if (!(x[i] > 0.0f)) d[i] *= slope[c];
    }
}

// dslope[c] += sum of dy * x over the channel's elements where x <= 0,
// one thread per channel, in the CPU's order.
extern "C" __global__ void prelu_slope_diff_f32(int channels, long long n, long long dim,
                                                const float* x, const float* dy, float* dslope) {
    GRID_STRIDE(c, channels) {
        float sum = 0.0f;
        for (long long start = c * dim; start < n; start += dim * channels) {
            for (long long i = start; i < start + dim; ++i) {
                if (x[i] <= 0.0f) sum += dy[i] * x[i];
            }
        }
        dslope[c] += sum;
    }
}
