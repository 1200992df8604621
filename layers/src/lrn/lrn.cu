// LRN across channels on the GPU, as lrn/mod.rs computes it on the CPU:
// element (n, c, p) of a (N, C, P) blob, window c - r .. c + r clipped.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// scale = k + alpha / size * sum of x^2 over the window; y = x scale^-beta.
extern "C" __global__ void lrn_forward_f32(long long total, int channels, long long plane, int size,
                                           float alpha, float beta, float k, const float* x,
                                           float* scale, float* y) {
    GRID_STRIDE(i, total) {
        long long p = i % plane;
        int c = (int)((i / plane) % channels);
        long long base = i - (long long)c * plane - p;
        int r = (size - 1) / 2;
        int lo = c - r < 0 ? 0 : c - r;
        int hi = c + r >= channels ? channels - 1 : c + r;
        float sum = 0.0f;
        for (int j = lo; j <= hi; ++j) {
            float v = x[base + (long long)j * plane + p];
            sum += v * v;
        }
        float s = k + alpha / (float)size * sum;
        scale[i] = s;
        y[i] = x[i] * powf(s, -beta);
    }
}

// dx = dy scale^-beta - 2 alpha beta / size * x * sum over the window of
// dy y / scale.
extern "C" __global__ void lrn_backward_f32(long long total, int channels, long long plane,
                                            int size, float alpha, float beta, const float* x,
                                            const float* y, const float* scale, const float* dy,
                                            float* dx) {
    GRID_STRIDE(i, total) {
        long long p = i % plane;
        int c = (int)((i / plane) % channels);
        long long base = i - (long long)c * plane - p;
        int r = (size - 1) / 2;
        int lo = c - r < 0 ? 0 : c - r;
        int hi = c + r >= channels ? channels - 1 : c + r;
        float sum = 0.0f;
        for (int j = lo; j <= hi; ++j) {
            long long at = base + (long long)j * plane + p;
            sum += dy[at] * y[at] / scale[at];
        }
        dx[i] = dy[i] * powf(scale[i], -beta) - 2.0f * alpha * beta / (float)size * x[i] * sum;
    }
}
