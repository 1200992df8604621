// MVN on the GPU, as mvn/mod.rs does on the CPU: each group (an item's
// channel, or an item) summed in order in double by one thread, for its
// mean and, with the variance normalized, std + eps.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// The mean of a group's `dim` values and what it is divided by (1 unless
// the variance is normalized).
__device__ static void mvn_statistics(const float* v, long long dim, int normalize_variance,
                                      double eps, double* mean, double* scale) {
    double n = (double)(dim > 0 ? dim : 1);
    double sum = 0.0;
    for (long long k = 0; k < dim; ++k) {
        sum += (double)v[k];
    }
    *mean = sum / n;
    *scale = 1.0;
    if (normalize_variance) {
        double squares = 0.0;
        for (long long k = 0; k < dim; ++k) {
            double d = (double)v[k] - *mean;
            squares += d * d;
        }
        *scale = sqrt(squares / n) + eps;
    }
}

// y = (x - mean) / scale, one thread a group.
extern "C" __global__ void mvn_forward_f32(long long groups, long long dim,
                                           int normalize_variance, double eps, const float* x,
                                           float* y) {
    GRID_STRIDE(g, groups) {
        const float* v = x + g * dim;
        double mean, scale;
        mvn_statistics(v, dim, normalize_variance, eps, &mean, &scale);
        for (long long k = 0; k < dim; ++k) {
            y[g * dim + k] = (float)(((double)v[k] - mean) / scale);
        }
    }
}

// dx = (dy - mean(dy) - y mean(y dy)) / scale (the last term only with
// the variance normalized), one thread a group.
extern "C" __global__ void mvn_backward_f32(long long groups, long long dim,
                                            int normalize_variance, double eps, const float* x,
                                            const float* y, const float* dy, float* dx) {
    GRID_STRIDE(g, groups) {
        long long at = g * dim;
        double mean, scale;
        mvn_statistics(x + at, dim, normalize_variance, eps, &mean, &scale);
        double n = (double)(dim > 0 ? dim : 1);
        double sum_dy = 0.0, sum_y_dy = 0.0;
        for (long long k = 0; k < dim; ++k) {
            sum_dy += (double)dy[at + k];
            sum_y_dy += (double)y[at + k] * (double)dy[at + k];
        }
        double mean_dy = sum_dy / n;
        double mean_y_dy = normalize_variance ? sum_y_dy / n : 0.0;
        for (long long k = 0; k < dim; ++k) {
            double yv = y[at + k];
            dx[at + k] = (float)(((double)dy[at + k] - mean_dy - yv * mean_y_dy) / scale);
        }
    }
}
