// Caffe's SGD step for one parameter on the GPU, in one pass: Regularize
// (L2), ComputeUpdateValue (momentum; Caffe's sgd_update_gpu) and
// Net::Update, in the order the CPU side computes them.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// diff += decay * data; history = momentum * history + rate * diff;
// diff = history; data -= diff.
extern "C" __global__ void sgd_step_f32(long long n, float decay, float rate, float momentum,
                                        float* data, float* diff, float* history) {
    GRID_STRIDE(i, n) {
        float g = diff[i] + decay * data[i];
        float h = momentum * history[i] + rate * g;
        history[i] = h;
        diff[i] = h;
        data[i] = data[i] - h;
    }
}
