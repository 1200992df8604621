// Upsample on the GPU, as upsample/mod.rs computes it on the CPU: YOLO's
// nearest repetition (forward a gather, backward each input's block
// summed in the CPU's order) and SegNet's unpooling by a mask (forward
// zeros then each value put at its position; backward a gather).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// y[plane, r, q] = x[plane, r / sh, q / sw], one thread an output.
extern "C" __global__ void upsample_nearest_f32(long long n, long long h, long long w, int sh,
                                                int sw, const float* x, float* y) {
    GRID_STRIDE(i, n) {
        long long ow = w * sw, oh = h * sh;
        long long q = i % ow, r = (i / ow) % oh, plane = i / (ow * oh);
        y[i] = x[(plane * h + r / sh) * w + q / sw];
    }
}

// dx[plane, r, q] = the sum of dy over its sh x sw block, row by row.
extern "C" __global__ void upsample_nearest_backward_f32(long long n, long long h, long long w,
                                                         int sh, int sw, const float* dy,
                                                         float* dx) {
    GRID_STRIDE(i, n) {
        long long q = i % w, r = (i / w) % h, plane = i / (w * h);
        long long ow = w * sw;
        const float* block = dy + (plane * h * sh + r * sh) * ow + q * sw;
        float sum = 0.0f;
        for (int a = 0; a < sh; ++a)
            for (int b = 0; b < sw; ++b) sum += block[a * ow + b];
        dx[i] = sum;
    }
}

// y[plane, mask[i]] = x[i], one thread an input (the output zeroed
// first; the layer has checked every position lies in its plane).
extern "C" __global__ void unpool_f32(long long n, long long plane_in, long long plane_out,
                                      const float* x, const float* mask, float* y) {
    GRID_STRIDE(i, n) {
        long long plane = i / plane_in;
        y[plane * plane_out + (long long)mask[i]] = x[i];
    }
}

// dx[i] = dy[plane, mask[i]].
extern "C" __global__ void unpool_backward_f32(long long n, long long plane_in,
                                               long long plane_out, const float* dy,
                                               const float* mask, float* dx) {
    GRID_STRIDE(i, n) {
        long long plane = i / plane_in;
        dx[i] = dy[plane * plane_out + (long long)mask[i]];
    }
}

// y = 0, for unpooling.
extern "C" __global__ void upsample_zero_f32(long long n, float* y) {
    GRID_STRIDE(i, n) { y[i] = 0.0f; }
}
