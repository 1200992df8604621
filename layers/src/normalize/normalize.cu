// The SSD fork's Normalize on the GPU, as normalize/mod.rs computes it on
// the CPU. The input is (N, C, P): P values per channel. A value shares
// its norm with its whole image (across_spatial) or with the other
// channels of its pixel; the learned factor is one (channel_shared) or
// one per channel.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// The norm value i divides by: its image's, or its pixel's.
__device__ long long norm_of(long long i, int channels, long long plane, int across) {
    long long image = i / (channels * plane);
    return across ? image : image * plane + i % plane;
}

// The factor value i is scaled by.
__device__ float factor_of(const float* scale, long long i, int channels, long long plane,
                           int shared) {
    return shared ? scale[0] : scale[(i / plane) % channels];
}

// out[k] = sum over c of m[(image * channels + c) * plane + q], for pixel
// k = image * plane + q, channels added in order.
extern "C" __global__ void normalize_channel_sums_f32(long long pixels, int channels,
                                                      long long plane, const float* m,
                                                      float* out) {
    GRID_STRIDE(k, pixels) {
        long long image = k / plane, q = k % plane;
        const float* at = m + image * channels * plane + q;
        float sum = 0.0f;
        for (int c = 0; c < channels; ++c) sum += at[c * plane];
        out[k] = sum;
    }
}

// norms[k] = sqrt(norms[k] + eps): a sum of squares made a norm.
extern "C" __global__ void normalize_root_f32(long long n, float eps, float* norms) {
    GRID_STRIDE(k, n) { norms[k] = sqrtf(norms[k] + eps); }
}

// y = x / norm * factor.
extern "C" __global__ void normalize_forward_f32(long long total, int channels, long long plane,
                                                 int across, int shared, const float* x,
                                                 const float* norms, const float* scale,
                                                 float* y) {
    GRID_STRIDE(i, total) {
        y[i] = x[i] / norms[norm_of(i, channels, plane, across)] *
               factor_of(scale, i, channels, plane, shared);
    }
}

// The same in place: y holds x.
extern "C" __global__ void normalize_forward_inplace_f32(long long total, int channels,
                                                         long long plane, int across, int shared,
                                                         const float* norms, const float* scale,
                                                         float* y) {
    GRID_STRIDE(i, total) {
        y[i] = y[i] / norms[norm_of(i, channels, plane, across)] *
               factor_of(scale, i, channels, plane, shared);
    }
}

// out = x dy factor: summed per norm, the dot of the normalized input
// with the scaled gradient, times the norm.
extern "C" __global__ void normalize_dot_terms_f32(long long total, int channels, long long plane,
                                                   int shared, const float* x, const float* dy,
                                                   const float* scale, float* out) {
    GRID_STRIDE(i, total) { out[i] = x[i] * dy[i] * factor_of(scale, i, channels, plane, shared); }
}

// out = x / norm * dy: summed per channel (or in all), the factor's
// gradient.
extern "C" __global__ void normalize_scale_terms_f32(long long total, int channels,
                                                     long long plane, int across, const float* x,
                                                     const float* dy, const float* norms,
                                                     float* out) {
    GRID_STRIDE(i, total) { out[i] = x[i] / norms[norm_of(i, channels, plane, across)] * dy[i]; }
}

// dx = (dy factor - x dot / norm^2) / norm, dot from normalize_dot_terms.
extern "C" __global__ void normalize_backward_f32(long long total, int channels, long long plane,
                                                  int across, int shared, const float* x,
                                                  const float* dy, const float* scale,
                                                  const float* norms, const float* dots,
                                                  float* dx) {
    GRID_STRIDE(i, total) {
        long long k = norm_of(i, channels, plane, across);
        float norm = norms[k];
        float u = x[i] / norm;
        float g = dy[i] * factor_of(scale, i, channels, plane, shared);
        dx[i] = (g - u * (dots[k] / norm)) / norm;
    }
}
