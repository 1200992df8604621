// The user_layer example's own kernel, compiled by NVRTC when the
// example first runs on a GPU: y[b, c] = x[b, c] * gamma[c], a grid-stride
// loop as every kernel of blobflow is (so tests/cuda-on-cpu runs it too).
extern "C" __global__ void scale_channels_f32(long long total, int channels, const float* x,
                                              const float* gamma, float* y) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)blockDim.x * gridDim.x) {
        y[i] = x[i] * gamma[i % channels];
    }
}
