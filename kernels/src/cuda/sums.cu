// Strided sums in passes (sums.rs): partial sums of every lanes-th
// value, neighbouring threads reading neighbouring values, then each sum's
// partials added in lane order, so the result does not depend on timing.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// partial[r * lanes + lane] = sum over t = lane, lane + lanes, ... < len of
// m[r * sum_stride + (t / run) * run_stride + t % run]. The run and the
// offset in it advance by additions: a 64-bit division per value would
// cost more than the load.
extern "C" __global__ void partial_sums_f32(long long total, int lanes, long long len,
                                            long long run, long long sum_stride,
                                            long long run_stride, const float* m,
                                            float* partial) {
    GRID_STRIDE(i, total) {
        long long r = i / lanes;
        long long lane = i % lanes;
        const float* base = m + r * sum_stride;
        long long q = lane / run, at = lane % run;
        const long long dq = lanes / run, dat = lanes % run;
        float sum = 0.0f;
        for (long long t = lane; t < len; t += lanes) {
            sum += base[q * run_stride + at];
            q += dq;
            at += dat;
            if (at >= run) {
                at -= run;
                ++q;
            }
        }
        partial[i] = sum;
    }
}

// sums[r] += partial[r * lanes + 0] + ... + partial[r * lanes + lanes - 1].
extern "C" __global__ void add_partial_sums_f32(long long sums_n, int lanes, const float* partial,
                                                float* sums) {
    GRID_STRIDE(r, sums_n) {
        float sum = 0.0f;
        for (int l = 0; l < lanes; ++l) sum += partial[r * lanes + l];
        sums[r] += sum;
    }
}
