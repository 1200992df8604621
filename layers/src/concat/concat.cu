// Concat's and Slice's moves on the GPU, as concat/mod.rs's Slabs make
// them on the CPU: a part of `len` steps of the axis, `inner` values a
// step, in each of its slabs, placed at `offset` of a joined axis `total`
// steps long.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// Where value i of the part lies in the joined blob.
__device__ long long joined_at(long long i, long long inner, long long total, long long offset,
                               long long len) {
    long long size = len * inner;
    return ((i / size) * total + offset) * inner + i % size;
}

// joined[its place] = part (Concat forward, Slice backward).
extern "C" __global__ void slabs_join_f32(long long n, long long inner, long long total,
                                          long long offset, long long len, const float* part,
                                          float* joined) {
    GRID_STRIDE(i, n) { joined[joined_at(i, inner, total, offset, len)] = part[i]; }
}

// part = joined[its place] (Concat backward, Slice forward).
extern "C" __global__ void slabs_split_f32(long long n, long long inner, long long total,
                                           long long offset, long long len, const float* joined,
                                           float* part) {
    GRID_STRIDE(i, n) { part[i] = joined[joined_at(i, inner, total, offset, len)]; }
}
