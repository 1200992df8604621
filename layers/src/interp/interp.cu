// Interp's forward pass on the GPU, as interp/mod.rs computes it on the
// CPU: each output's two rows and two columns of the (cropped) input and
// their weights in the fork's float arithmetic (the far one from a float
// ratio, the near one 1 - far), summed in double, rounded once.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// Output o's source index, whether it has a next, and the far weight.
__device__ void interp_tap(long long o, long long from, long long to, long long* at, int* next,
                           float* far) {
    float ratio = to > 1 ? (float)(from - 1) / (float)(to - 1) : 0.0f;
    float r = ratio * (float)o;
    *at = (long long)r;
    *next = *at < from - 1 ? 1 : 0;
    *far = r - (float)*at;
}

extern "C" __global__ void interp_f32(long long n, long long full_h, long long full_w,
                                      long long crop, long long h, long long w, long long oh,
                                      long long ow, const float* x, float* y) {
    GRID_STRIDE(i, n) {
        long long q = i % ow, o = (i / ow) % oh, plane = i / (ow * oh);
        long long r, c;
        int rn, cn;
        float r1, c1;
        interp_tap(o, h, oh, &r, &rn, &r1);
        interp_tap(q, w, ow, &c, &cn, &c1);
        float r0 = 1.0f - r1, c0 = 1.0f - c1;
        const float* src = x + plane * full_h * full_w;
        long long p = (crop + r) * full_w + crop + c, below = p + rn * full_w;
        double top = (double)c0 * src[p] + (double)c1 * src[p + cn];
        double bottom = (double)c0 * src[below] + (double)c1 * src[below + cn];
        y[i] = (float)((double)r0 * top + (double)r1 * bottom);
    }
}
