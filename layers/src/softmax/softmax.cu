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

// Each position's loss term -log(max(p[label], FLT_MIN)) * weight[label]
// (SegNet's class weights; all 1 without), 0 where the label is the
// ignored one; labels were checked on the host. Positions are (outer,
// inner) over prob's (outer, classes, inner).
extern "C" __global__ void softmax_loss_terms_f32(long long positions, int classes, long long inner,
                                                  const float* prob, const float* labels,
                                                  int has_ignore, long long ignore,
                                                  const float* weights, float* terms) {
    GRID_STRIDE(at, positions) {
        float label = labels[at];
        if (has_ignore && (double)label == (double)ignore) {
            terms[at] = 0.0f;
            continue;
        }
        int c = (int)label;
        long long o = at / inner, i = at % inner;
        float v = prob[(o * classes + c) * inner + i];
        terms[at] = -__fmul_rn(logf(fmaxf(v, 1.17549435e-38f)), weights[c]);
    }
}

// loss[0] = the terms added in order by one thread, as the CPU adds them,
// over the normalization's divisor (computed on the host): the loss stays
// on the GPU until it is read.
extern "C" __global__ void softmax_loss_sum_f32(long long positions, const float* terms,
                                                float divisor, float* loss) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    float sum = 0.0f;
    for (long long r = 0; r < positions; ++r) sum = __fadd_rn(sum, terms[r]);
    loss[0] = __fdiv_rn(sum, divisor);
}

// dlogits = (prob - onehot(label)) * weight[label] * scale in the CPU's
// roundings, 0 at an ignored label's position.
extern "C" __global__ void softmax_loss_backward_f32(long long total, int classes, long long inner,
                                                     const float* prob, const float* labels,
                                                     int has_ignore, long long ignore,
                                                     const float* weights, float scale,
                                                     float* dx) {
    GRID_STRIDE(e, total) {
        long long i = e % inner, row = e / inner;
        int k = (int)(row % classes);
        long long o = row / classes;
        float label = labels[o * inner + i];
        if (has_ignore && (double)label == (double)ignore) {
            dx[e] = __fmul_rn(0.0f, scale);
            continue;
        }
        int c = (int)label;
        float v = prob[e];
        if (k == c) v = __fsub_rn(v, 1.0f);
        dx[e] = __fmul_rn(__fmul_rn(v, weights[c]), scale);
    }
}
