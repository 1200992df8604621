// Pooling on the GPU, as pool/cpu.rs: windows without padding clipped to
// the input, MAX remembering the first maximum's position in its plane.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

extern "C" __global__ void max_pool_f32(long long total, int h, int w, int oh, int ow, int k,
                                        int s, const float* x, float* y, unsigned int* argmax) {
    GRID_STRIDE(o, total) {
        long long plane = o / ((long long)oh * ow);
        int r = (int)((o / ow) % oh), q = (int)(o % ow);
        int h0 = r * s, w0 = q * s;
        int h1 = min(h0 + k, h), w1 = min(w0 + k, w);
        const float* xp = x + plane * h * w;
        float best = -__int_as_float(0x7f800000);  // -infinity
        int at = h0 * w + w0;
        for (int i = h0; i < h1; ++i)
            for (int j = w0; j < w1; ++j)
                if (xp[i * w + j] > best) { best = xp[i * w + j]; at = i * w + j; }
        y[o] = best;
        argmax[o] = (unsigned int)at;
    }
}

// dx is zeroed first (by the caller); each output adds its gradient to
// its maximum's input.
extern "C" __global__ void max_unpool_f32(long long total, int hw, int ohw, const float* dy,
                                          const unsigned int* argmax, float* dx) {
    GRID_STRIDE(o, total) {
        atomicAdd(&dx[(o / ohw) * hw + argmax[o]], dy[o]);
    }
}

extern "C" __global__ void ave_pool_f32(long long total, int h, int w, int oh, int ow, int k,
                                        int s, const float* x, float* y) {
    GRID_STRIDE(o, total) {
        long long plane = o / ((long long)oh * ow);
        int r = (int)((o / ow) % oh), q = (int)(o % ow);
        int h0 = r * s, w0 = q * s;
        int h1 = min(h0 + k, h), w1 = min(w0 + k, w);
        const float* xp = x + plane * h * w;
        float sum = 0.0f;
        for (int i = h0; i < h1; ++i)
            for (int j = w0; j < w1; ++j) sum += xp[i * w + j];
        y[o] = sum / (float)((h1 - h0) * (w1 - w0));
    }
}

// dx is zeroed first; each output spreads its gradient over its window.
extern "C" __global__ void ave_unpool_f32(long long total, int h, int w, int oh, int ow, int k,
                                          int s, const float* dy, float* dx) {
    GRID_STRIDE(o, total) {
        long long plane = o / ((long long)oh * ow);
        int r = (int)((o / ow) % oh), q = (int)(o % ow);
        int h0 = r * s, w0 = q * s;
        int h1 = min(h0 + k, h), w1 = min(w0 + k, w);
        float share = dy[o] / (float)((h1 - h0) * (w1 - w0));
        float* dp = dx + plane * h * w;
        for (int i = h0; i < h1; ++i)
            for (int j = w0; j < w1; ++j) atomicAdd(&dp[i * w + j], share);
    }
}

extern "C" __global__ void zero_f32(long long n, float* y) {
    GRID_STRIDE(i, n) { y[i] = 0.0f; }
}
