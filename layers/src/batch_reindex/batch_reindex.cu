// BatchReindex on the GPU, as batch_reindex/mod.rs does on the CPU: the
// output's items are the input's at the indices; backward adds each
// output item's gradient to its input item, one thread a position within
// an item taking the indices in order.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// One thread an output value; `index` holds checked item numbers.
extern "C" __global__ void batch_reindex_forward_f32(long long n, long long inner,
                                                     const float* index, const float* x,
                                                     float* y) {
    GRID_STRIDE(p, n) {
        y[p] = x[(long long)index[p / inner] * inner + p % inner];
    }
}

// dx = 0, then dx[index[o]] += dy[o] for the `picks` output items.
extern "C" __global__ void batch_reindex_backward_f32(long long inner, long long items,
                                                      long long picks, const float* index,
                                                      const float* dy, float* dx) {
    GRID_STRIDE(k, inner) {
        for (long long i = 0; i < items; ++i) {
            dx[i * inner + k] = 0.0f;
        }
        for (long long o = 0; o < picks; ++o) {
            dx[(long long)index[o] * inner + k] += dy[o * inner + k];
        }
    }
}
