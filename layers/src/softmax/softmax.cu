// Softmax and SoftmaxWithLoss on the GPU, one thread per row (a row is
// one item's classes, strided by `inner` for a softmax over an inner
// axis), as softmax/mod.rs computes them.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// One thread per position (outer index o, inner index i): softmax over
// the `classes` values at (o * classes + c) * inner + i. A row of a
// (B, C) blob is inner = 1; per-pixel class scores of (N, C, H, W) are
// inner = H * W.
extern "C" __global__ void softmax_rows_f32(long long positions, int classes, long long inner,
                                            const float* x, float* prob) {
    GRID_STRIDE(r, positions) {
        long long base = (r / inner) * classes * inner + r % inner;
        const float* in = x + base;
        float* out = prob + base;
        float m = in[0];
        for (int c = 1; c < classes; ++c) m = fmaxf(m, in[c * inner]);
        float sum = 0.0f;
        for (int c = 0; c < classes; ++c) {
            out[c * inner] = expf(in[c * inner] - m);
            sum += out[c * inner];
        }
        float inv = 1.0f / sum;
        for (int c = 0; c < classes; ++c) out[c * inner] *= inv;
    }
}

// dx = p * (dp - sum(dp * p)) per position.
extern "C" __global__ void softmax_backward_f32(long long positions, int classes, long long inner,
                                                const float* prob, const float* dprob, float* dx) {
    GRID_STRIDE(r, positions) {
        long long base = (r / inner) * classes * inner + r % inner;
        const float* p = prob + base;
        const float* g = dprob + base;
        float dot = 0.0f;
        for (int c = 0; c < classes; ++c) dot += p[c * inner] * g[c * inner];
        for (int c = 0; c < classes; ++c) dx[base + c * inner] = p[c * inner] * (g[c * inner] - dot);
    }
}

// Each row's loss -log(max(p[label], FLT_MIN)); labels were checked on the
// host.
extern "C" __global__ void softmax_loss_rows_f32(long long rows, int classes, const float* prob,
                                                 const float* labels, float* losses) {
    GRID_STRIDE(r, rows) {
        float v = prob[r * classes + (int)labels[r]];
        losses[r] = -logf(fmaxf(v, 1.17549435e-38f));
    }
}

// loss[0] = the mean of the rows' losses, added in order by one thread,
// as the CPU adds them: the loss stays on the GPU until it is read.
extern "C" __global__ void softmax_loss_mean_f32(long long rows, const float* losses, float* loss) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    float sum = 0.0f;
    for (long long r = 0; r < rows; ++r) sum += losses[r];
    loss[0] = sum / (float)(rows > 0 ? rows : 1);
}

// dlogits = (prob - onehot(label)) * scale.
extern "C" __global__ void softmax_loss_backward_f32(long long total, int classes,
                                                     const float* prob, const float* labels,
                                                     float scale, float* dx) {
    GRID_STRIDE(i, total) {
        long long r = i / classes;
        int c = (int)(i % classes);
        float v = prob[i] - (c == (int)labels[r] ? 1.0f : 0.0f);
        dx[i] = v * scale;
    }
}
