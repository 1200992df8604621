// Permute on the GPU, as permute/mod.rs walks it on the CPU: value i of a
// (d0, d1, d2, d3) top is the bottom's at a0 s0 + a1 s1 + a2 s2 + a3 s3,
// (a0, a1, a2, a3) being i's multi-index in the top (a top of fewer axes
// is padded with leading axes of one value).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// Where top value i lies in the bottom.
__device__ long long source(long long i, long long d1, long long d2, long long d3, long long s0,
                            long long s1, long long s2, long long s3) {
    long long a3 = i % d3;
    i /= d3;
    long long a2 = i % d2;
    i /= d2;
    long long a1 = i % d1;
    return (i / d1) * s0 + a1 * s1 + a2 * s2 + a3 * s3;
}

// y = the permuted x (forward).
extern "C" __global__ void permute_f32(long long n, long long d1, long long d2, long long d3,
                                       long long s0, long long s1, long long s2, long long s3,
                                       const float* x, float* y) {
    GRID_STRIDE(i, n) { y[i] = x[source(i, d1, d2, d3, s0, s1, s2, s3)]; }
}

// dx = dy put back in the bottom's order (backward): each bottom value is
// one top value's, so the writes never meet.
extern "C" __global__ void unpermute_f32(long long n, long long d1, long long d2, long long d3,
                                         long long s0, long long s1, long long s2, long long s3,
                                         const float* dy, float* dx) {
    GRID_STRIDE(i, n) { dx[source(i, d1, d2, d3, s0, s1, s2, s3)] = dy[i]; }
}
