// Pooling on the GPU, as pool/cpu.rs: windows without padding clipped to
// the input, MAX remembering the first maximum's position in its plane.
// A window that starts past the input's end (a stride longer than the
// window, under the ceil rule) gives 0 and has no maximum's position.

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
        if (h1 <= h0 || w1 <= w0) {
            y[o] = 0.0f;
            argmax[o] = 0xffffffffu;
            continue;
        }
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

extern "C" __global__ void ave_pool_f32(long long total, int h, int w, int oh, int ow, int k,
                                        int s, const float* x, float* y) {
    GRID_STRIDE(o, total) {
        long long plane = o / ((long long)oh * ow);
        int r = (int)((o / ow) % oh), q = (int)(o % ow);
        int h0 = r * s, w0 = q * s;
        int h1 = min(h0 + k, h), w1 = min(w0 + k, w);
        if (h1 <= h0 || w1 <= w0) {
            y[o] = 0.0f;
            continue;
        }
        const float* xp = x + plane * h * w;
        float sum = 0.0f;
        for (int i = h0; i < h1; ++i)
            for (int j = w0; j < w1; ++j) sum += xp[i * w + j];
        y[o] = sum / (float)((h1 - h0) * (w1 - w0));
    }
}

// The backward passes gather: each input value adds up the gradients of
// the outputs whose windows hold it, in output order, as the CPU side
// adds them. No atomics and no zeroing pass: the input gradient is the
// CPU's bit for bit, whatever the windows' overlap.

// Input value i of its plane, and the outputs whose windows (start
// o * s, length k) hold it: rows r0..r1, columns q0..q1.
struct Covering {
    long long plane;
    int at, r0, r1, q0, q1;
};

__device__ int first_covering(int i, int k, int s) { return i < k ? 0 : (i - k) / s + 1; }

__device__ Covering covering(long long i, int h, int w, int oh, int ow, int k, int s) {
    Covering c;
    c.plane = i / ((long long)h * w);
    c.at = (int)(i % ((long long)h * w));
    int r = c.at / w, q = c.at % w;
    c.r0 = first_covering(r, k, s);
    c.r1 = min(r / s + 1, oh);
    c.q0 = first_covering(q, k, s);
    c.q1 = min(q / s + 1, ow);
    return c;
}

// MAX: the gradients of the outputs whose maximum was this input.
extern "C" __global__ void max_unpool_f32(long long n, int h, int w, int oh, int ow, int k,
                                          int s, const float* dy, const unsigned int* argmax,
                                          float* dx) {
    GRID_STRIDE(i, n) {
        Covering c = covering(i, h, w, oh, ow, k, s);
        const float* dp = dy + c.plane * oh * ow;
        const unsigned int* ap = argmax + c.plane * oh * ow;
        float sum = 0.0f;
        for (int r = c.r0; r < c.r1; ++r)
            for (int q = c.q0; q < c.q1; ++q)
                if (ap[r * ow + q] == (unsigned int)c.at) sum += dp[r * ow + q];
        dx[i] = sum;
    }
}

// AVE: each covering output's gradient shared over its clipped window.
extern "C" __global__ void ave_unpool_f32(long long n, int h, int w, int oh, int ow, int k,
                                          int s, const float* dy, float* dx) {
    GRID_STRIDE(i, n) {
        Covering c = covering(i, h, w, oh, ow, k, s);
        const float* dp = dy + c.plane * oh * ow;
        float sum = 0.0f;
        for (int r = c.r0; r < c.r1; ++r)
            for (int q = c.q0; q < c.q1; ++q) {
                int rows = min(r * s + k, h) - r * s, cols = min(q * s + k, w) - q * s;
                sum += dp[r * ow + q] / (float)(rows * cols);
            }
        dx[i] = sum;
    }
}
