// Reorg on the GPU, as reorg/mod.rs moves the values on the CPU: each
// position p of the input's (channels, height, width) items is paired
// with darknet's q, the position (c mod C/s², h·s + o div s, w·s + o mod s),
// o = c div (C/s²), of the same values read as C/s² x H·s x W·s.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// to[p] = from[q] where gather, else to[q] = from[p]; one thread a p.
extern "C" __global__ void reorg_f32(long long n, long long channels, long long height,
                                     long long width, long long stride, int gather,
                                     const float* from, float* to) {
    GRID_STRIDE(p, n) {
        long long col = p % width, row = (p / width) % height;
        long long ch = (p / (width * height)) % channels, item = p / (width * height * channels);
        long long groups = channels / (stride * stride);
        long long c2 = ch % groups, offset = ch / groups;
        long long row2 = row * stride + offset / stride, col2 = col * stride + offset % stride;
        long long q = ((item * groups + c2) * height * stride + row2) * width * stride + col2;
        if (gather) {
            to[p] = from[q];
        } else {
            to[q] = from[p];
        }
    }
}
