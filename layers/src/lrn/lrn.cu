// LRN on the GPU, as lrn/mod.rs computes it on the CPU. Across channels:
// element (n, c, p) of a (N, C, P) blob, window c - r .. c + r clipped.
// Within a channel: element (plane, i, j) of (planes, H, W), window
// i - r .. i + r by j - r .. j + r clipped to the plane.

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

// The window within a channel around value i of (planes, height, width):
// its plane's first value, and rows r0..=r1, columns c0..=c1 clipped.
struct Window {
    long long base, r0, r1, c0, c1;
};

__device__ Window window_of(long long i, long long height, long long width, int size) {
    long long col = i % width;
    long long row = (i / width) % height;
    int r = (size - 1) / 2;
    Window w;
    w.base = i - row * width - col;
    w.r0 = row - r < 0 ? 0 : row - r;
    w.r1 = row + r >= height ? height - 1 : row + r;
    w.c0 = col - r < 0 ? 0 : col - r;
    w.c1 = col + r >= width ? width - 1 : col + r;
    return w;
}

// Within a channel: scale = 1 + alpha / size^2 * sum of x^2 over the
// window; y = x scale^-beta.
extern "C" __global__ void lrn_within_forward_f32(long long total, long long height,
                                                  long long width, int size, float alpha,
                                                  float beta, const float* x, float* scale,
                                                  float* y) {
    GRID_STRIDE(i, total) {
        Window win = window_of(i, height, width, size);
        float sum = 0.0f;
        for (long long a = win.r0; a <= win.r1; ++a) {
            for (long long b = win.c0; b <= win.c1; ++b) {
                float v = x[win.base + a * width + b];
                sum += v * v;
            }
        }
        float s = 1.0f + alpha / (float)(size * size) * sum;
        scale[i] = s;
        y[i] = x[i] * powf(s, -beta);
    }
}

// Within a channel: dx = dy scale^-beta - 2 alpha beta / size^2 * x * sum
// over the window of dy y / scale.
extern "C" __global__ void lrn_within_backward_f32(long long total, long long height,
                                                   long long width, int size, float alpha,
                                                   float beta, const float* x, const float* y,
                                                   const float* scale, const float* dy,
                                                   float* dx) {
    GRID_STRIDE(i, total) {
        Window win = window_of(i, height, width, size);
        float sum = 0.0f;
        for (long long a = win.r0; a <= win.r1; ++a) {
            for (long long b = win.c0; b <= win.c1; ++b) {
                long long at = win.base + a * width + b;
                sum += dy[at] * y[at] / scale[at];
            }
        }
        dx[i] = dy[i] * powf(scale[i], -beta)
                - 2.0f * alpha * beta / (float)(size * size) * x[i] * sum;
    }
}
