// Layer kernels for LeNet-style forward passes on the GPU, matching the
// CPU layers of blobflow::nn::layers element for element.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// im2col of a whole batch: col is (cin*k*k) x (batch*oh*ow); row (c, ki, kj),
// column (image, r, q), value x[image, c, r*s + ki, q*s + kj].
extern "C" __global__ void im2col_batch_f32(long long total, int cin, int h, int w, int k, int s,
                                            int oh, int ow, int batch, const float* x, float* col) {
    long long cols = (long long)batch * oh * ow;
    GRID_STRIDE(idx, total) {
        long long row = idx / cols;
        long long j = idx % cols;
        int kj = (int)(row % k);
        int ki = (int)((row / k) % k);
        int c = (int)(row / ((long long)k * k));
        int img = (int)(j / ((long long)oh * ow));
        int p = (int)(j % ((long long)oh * ow));
        int r = p / ow;
        int q = p % ow;
        col[idx] = x[(((long long)img * cin + c) * h + (r * s + ki)) * w + (q * s + kj)];
    }
}

// y[image, co, p] = tmp[co, image * P + p] + bias[co]: the gemm's
// (cout, batch*P) result back to (batch, cout, P).
extern "C" __global__ void scatter_bias_f32(long long total, int cout, int batch, int p,
                                            const float* tmp, const float* bias, float* y) {
    GRID_STRIDE(idx, total) {
        int pp = (int)(idx % p);
        int co = (int)((idx / p) % cout);
        int img = (int)(idx / ((long long)p * cout));
        y[idx] = tmp[(long long)co * batch * p + (long long)img * p + pp] + bias[co];
    }
}

// Max pooling without padding; the first maximum wins, as on the CPU.
extern "C" __global__ void maxpool_f32(long long total, int h, int w, int oh, int ow, int k, int s,
                                       const float* x, float* y) {
    GRID_STRIDE(idx, total) {
        int q = (int)(idx % ow);
        int r = (int)((idx / ow) % oh);
        long long plane = idx / ((long long)oh * ow);
        const float* in = x + plane * h * w;
        int h0 = r * s, w0 = q * s;
        int h1 = min(h0 + k, h), w1 = min(w0 + k, w);
        float best = -3.402823466e+38f;
        for (int a = h0; a < h1; ++a) {
            for (int b = w0; b < w1; ++b) {
                float v = in[a * w + b];
                if (v > best) best = v;
            }
        }
        y[idx] = best;
    }
}

extern "C" __global__ void relu_f32(long long n, float* y) {
    GRID_STRIDE(i, n) { y[i] = y[i] > 0.0f ? y[i] : 0.0f; }
}

// y[row, j] += bias[j] for a (rows, n) matrix.
extern "C" __global__ void add_bias_rows_f32(long long total, int n, const float* bias, float* y) {
    GRID_STRIDE(i, total) { y[i] += bias[i % n]; }
}
