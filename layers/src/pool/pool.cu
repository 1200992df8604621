// Pooling on the GPU, as pool/cpu.rs: windows of kh x kw at strides sh,
// sw over an input padded by ph, pw, clipped to the input; MAX
// remembering the first maximum's position in its plane, AVE dividing by
// the window clipped to the padded input (padding counted, as Caffe
// does). A window that holds no input value (a stride longer than the
// window, under the ceil rule) gives 0 and has no maximum's position.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// Output o's window on one axis, clipped to the input: start..end.
__device__ void span(int o, int k, int s, int p, int n, int* start, int* end) {
    int a = o * s - p, b = a + k;
    *start = min(max(a, 0), n);
    *end = max(min(b, n), *start);
}

// AVE's divisor on one axis: the window clipped to the padded input.
__device__ int extent(int o, int k, int s, int p, int n) {
    int a = o * s, b = min(a + k, n + 2 * p);
    return max(b - a, 0);
}

extern "C" __global__ void max_pool_f32(long long total, int h, int w, int oh, int ow, int kh,
                                        int kw, int sh, int sw, int ph, int pw, const float* x,
                                        float* y, unsigned int* argmax) {
    GRID_STRIDE(o, total) {
        long long plane = o / ((long long)oh * ow);
        int r = (int)((o / ow) % oh), q = (int)(o % ow);
        int h0, h1, w0, w1;
        span(r, kh, sh, ph, h, &h0, &h1);
        span(q, kw, sw, pw, w, &w0, &w1);
        if (h1 <= h0 || w1 <= w0) {
            y[o] = 0.0f;
            argmax[o] = 0xffffffffu;
            continue;
        }
        const float* xp = x + plane * h * w;
        float best = -3.402823466e+38f;  // -FLT_MAX, where Caffe starts a window
        int at = h0 * w + w0;
        for (int i = h0; i < h1; ++i)
            for (int j = w0; j < w1; ++j)
                if (xp[i * w + j] > best) { best = xp[i * w + j]; at = i * w + j; }
        y[o] = best;
        argmax[o] = (unsigned int)at;
    }
}

extern "C" __global__ void ave_pool_f32(long long total, int h, int w, int oh, int ow, int kh,
                                        int kw, int sh, int sw, int ph, int pw, const float* x,
                                        float* y) {
    GRID_STRIDE(o, total) {
        long long plane = o / ((long long)oh * ow);
        int r = (int)((o / ow) % oh), q = (int)(o % ow);
        int h0, h1, w0, w1;
        span(r, kh, sh, ph, h, &h0, &h1);
        span(q, kw, sw, pw, w, &w0, &w1);
        int size = extent(r, kh, sh, ph, h) * extent(q, kw, sw, pw, w);
        if (size == 0 || h1 <= h0 || w1 <= w0) {
            y[o] = 0.0f;
            continue;
        }
        const float* xp = x + plane * h * w;
        float sum = 0.0f;
        for (int i = h0; i < h1; ++i)
            for (int j = w0; j < w1; ++j) sum += xp[i * w + j];
        y[o] = sum / (float)size;
    }
}

// The backward passes gather: each input value adds up the gradients of
// the outputs whose windows hold it, in output order, as the CPU side
// adds them. No atomics and no zeroing pass: the input gradient is the
// CPU's bit for bit, whatever the windows' overlap.

// The outputs on one axis whose windows (start o s - p, length k) hold
// input i: o0..o1.
__device__ void covering(int i, int k, int s, int p, int outputs, int* o0, int* o1) {
    int at = i + p;
    *o0 = at < k ? 0 : (at - k) / s + 1;
    *o1 = min(at / s + 1, outputs);
}

// MAX: the gradients of the outputs whose maximum was this input.
extern "C" __global__ void max_unpool_f32(long long n, int h, int w, int oh, int ow, int kh,
                                          int kw, int sh, int sw, int ph, int pw,
                                          const float* dy, const unsigned int* argmax,
                                          float* dx) {
    GRID_STRIDE(i, n) {
        long long plane = i / ((long long)h * w);
        int at = (int)(i % ((long long)h * w));
        int r0, r1, q0, q1;
        covering(at / w, kh, sh, ph, oh, &r0, &r1);
        covering(at % w, kw, sw, pw, ow, &q0, &q1);
        const float* dp = dy + plane * oh * ow;
        const unsigned int* ap = argmax + plane * oh * ow;
        float sum = 0.0f;
        for (int r = r0; r < r1; ++r)
            for (int q = q0; q < q1; ++q)
                if (ap[r * ow + q] == (unsigned int)at) sum += dp[r * ow + q];
        dx[i] = sum;
    }
}

// AVE: each covering output's gradient shared over its divisor.
extern "C" __global__ void ave_unpool_f32(long long n, int h, int w, int oh, int ow, int kh,
                                          int kw, int sh, int sw, int ph, int pw,
                                          const float* dy, float* dx) {
    GRID_STRIDE(i, n) {
        long long plane = i / ((long long)h * w);
        int at = (int)(i % ((long long)h * w));
        int r0, r1, q0, q1;
        covering(at / w, kh, sh, ph, oh, &r0, &r1);
        covering(at % w, kw, sw, pw, ow, &q0, &q1);
        const float* dp = dy + plane * oh * ow;
        float sum = 0.0f;
        for (int r = r0; r < r1; ++r)
            for (int q = q0; q < q1; ++q) {
                int size = extent(r, kh, sh, ph, h) * extent(q, kw, sw, pw, w);
                sum += dp[r * ow + q] / (float)size;
            }
        dx[i] = sum;
    }
}
