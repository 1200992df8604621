// Strided moves on the GPU: value i of a (d0, d1, d2, d3) top is the
// bottom's at base + a0 s0 + a1 s1 + a2 s2 + a3 s3, (a0, a1, a2, a3) being
// i's multi-index in the top (a top of fewer axes is padded with leading
// axes of one value). Permute walks the bottom by its permuted strides
// (base 0), as permute/mod.rs does on the CPU; Crop by its own strides
// from the window's corner, as crop/mod.rs does.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// Where top value i lies in the bottom.
__device__ long long source(long long i, long long d1, long long d2, long long d3, long long s0,
                            long long s1, long long s2, long long s3, long long base) {
    long long a3 = i % d3;
    i /= d3;
    long long a2 = i % d2;
    i /= d2;
    long long a1 = i % d1;
    return base + (i / d1) * s0 + a1 * s1 + a2 * s2 + a3 * s3;
}

// y = x's values at their sources (forward).
extern "C" __global__ void gather_strided_f32(long long n, long long d1, long long d2, long long d3,
                                              long long s0, long long s1, long long s2,
                                              long long s3, long long base, const float* x,
                                              float* y) {
    GRID_STRIDE(i, n) { y[i] = x[source(i, d1, d2, d3, s0, s1, s2, s3, base)]; }
}

// dx at the sources = dy (backward): each top value has its own source,
// so the writes never meet; the rest of dx is the caller's.
extern "C" __global__ void scatter_strided_f32(long long n, long long d1, long long d2,
                                               long long d3, long long s0, long long s1,
                                               long long s2, long long s3, long long base,
                                               const float* dy, float* dx) {
    GRID_STRIDE(i, n) { dx[source(i, d1, d2, d3, s0, s1, s2, s3, base)] = dy[i]; }
}
