// Caffe's SGD step for one parameter on the GPU, in one pass: Regularize
// (L2, or L1 where l1 is not 0), ComputeUpdateValue (momentum; Caffe's sgd_update_gpu) and
// Net::Update, in the order the CPU side computes them.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// diff += decay * data (L1: decay * sign(data)); history = momentum *
// history + rate * diff; diff = history; data -= diff. As in Caffe a
// decay of 0 adds nothing, not even 0 * an infinite weight.
extern "C" __global__ void sgd_step_f32(long long n, float decay, int l1, float rate,
                                        float momentum, float* data, float* diff,
                                        float* history) {
    GRID_STRIDE(i, n) {
        float w = data[i];
        float penalty = l1 ? (float)((0.0f < w) - (w < 0.0f)) : w;
        float g = decay != 0.0f ? diff[i] + decay * penalty : diff[i];
        float h = momentum * history[i] + rate * g;
        history[i] = h;
        diff[i] = h;
        data[i] = w - h;
    }
}
