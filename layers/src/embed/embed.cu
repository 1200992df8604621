// Embed on the GPU, as embed/mod.rs does on the CPU: each index picks a
// row of the weights (plus the bias); the gradients add up by column, one
// thread a column taking the indices in order (no two threads write one
// place, and each place adds in the CPU's order).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// One thread an output value; `index` holds checked row numbers.
extern "C" __global__ void embed_forward_f32(long long n, long long outputs, const float* index,
                                             const float* weight, const float* bias,
                                             int has_bias, float* y) {
    GRID_STRIDE(p, n) {
        long long j = p % outputs;
        float v = weight[(long long)index[p / outputs] * outputs + j];
        if (has_bias) {
            v += bias[j];
        }
        y[p] = v;
    }
}

// dW[index[i]] += dy[i] for the `count` indices, one thread a column.
extern "C" __global__ void embed_weight_backward_f32(long long outputs, long long count,
                                                     const float* index, const float* dy,
                                                     float* dweight) {
    GRID_STRIDE(j, outputs) {
        for (long long i = 0; i < count; ++i) {
            dweight[(long long)index[i] * outputs + j] += dy[i * outputs + j];
        }
    }
}

// db += dy[i] for the `count` rows of dy, one thread a column.
extern "C" __global__ void embed_bias_backward_f32(long long outputs, long long count,
                                                   const float* dy, float* dbias) {
    GRID_STRIDE(j, outputs) {
        float sum = dbias[j];
        for (long long i = 0; i < count; ++i) {
            sum += dy[i * outputs + j];
        }
        dbias[j] = sum;
    }
}
