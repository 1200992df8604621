// ShuffleChannel on the GPU, as shuffle_channel/mod.rs moves the planes
// on the CPU: output channel j * group + i is input channel
// i * (channels / group) + j; backward moves the gradients back.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// The input channel output channel `out` reads.
__device__ long long shuffle_source(long long out, long long channels, long long group) {
    return (out % group) * (channels / group) + out / group;
}

// y[item, out, p] = x[item, source(out), p].
extern "C" __global__ void shuffle_channel_f32(long long n, long long channels, long long group,
                                               long long plane, const float* x, float* y) {
    GRID_STRIDE(i, n) {
        long long p = i % plane, out = (i / plane) % channels, item = i / (plane * channels);
        y[i] = x[(item * channels + shuffle_source(out, channels, group)) * plane + p];
    }
}

// dx[item, source(out), p] = dy[item, out, p], one thread an output.
extern "C" __global__ void unshuffle_channel_f32(long long n, long long channels, long long group,
                                                 long long plane, const float* dy, float* dx) {
    GRID_STRIDE(i, n) {
        long long p = i % plane, out = (i / plane) % channels, item = i / (plane * channels);
        dx[(item * channels + shuffle_source(out, channels, group)) * plane + p] = dy[i];
    }
}
