// Caffe's ArgMax on the GPU, as argmax/mod.rs ranks on the CPU: one
// thread per ranked run (an item, and a position along the axes after
// the ranked one), picking its top_k by top_k scans. Values rank by
// their total order (Rust's f32::total_cmp: NaN above infinity), ties
// to the larger index, as Caffe's partial sort leaves them.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// A key whose integer order is the values' total order.
__device__ long long total_key(float v) {
    int b = __float_as_int(v);
    return (long long)(b ^ ((b >> 31) & 0x7fffffff));
}

// Run t = item * inner + i ranks x[(item * span + j) * inner + i] over j.
// along_axis: y[(item * top_k + r) * inner + i] = the r-th index (or its
// value with out_max_val); otherwise (inner is 1) y[item * width + r] =
// the index, and with out_max_val y[item * width + top_k + r] = its value.
extern "C" __global__ void argmax_f32(long long runs, int span, long long inner, int top_k,
                                      int out_max_val, int along_axis, const float* x, float* y) {
    GRID_STRIDE(t, runs) {
        long long item = t / inner, i = t % inner;
        const float* run = x + item * span * inner + i;
        long long prev_key = 0;
        int prev_index = -1;
        for (int r = 0; r < top_k; ++r) {
            long long best_key = 0;
            int best = -1;
            for (int j = 0; j < span; ++j) {
                long long key = total_key(run[j * inner]);
                // Only what ranks below the previous pick is left.
                bool left = prev_index < 0 || key < prev_key || (key == prev_key && j < prev_index);
                if (left && (best < 0 || key > best_key || (key == best_key && j > best))) {
                    best_key = key;
                    best = j;
                }
            }
            float value = run[(long long)best * inner];
            if (along_axis) {
                y[(item * top_k + r) * inner + i] = out_max_val ? value : (float)best;
            } else {
                long long width = out_max_val ? 2LL * top_k : top_k;
                y[item * width + r] = (float)best;
                if (out_max_val) y[item * width + top_k + r] = value;
            }
            prev_key = best_key;
            prev_index = best;
        }
    }
}
