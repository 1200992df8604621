// Caffe's EuclideanLoss, SigmoidCrossEntropyLoss and ContrastiveLoss on
// the GPU, as euclidean.rs, sigmoid_cross_entropy.rs and contrastive.rs
// compute them on the host: each
// term in double; the terms summed in runs of `run` values (one thread a
// run, in order), the runs' sums then added in order by one thread, so the
// loss stays on the GPU until it is read.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// The end of run p of n values.
__device__ static long long run_end(long long p, long long run, long long n) {
    long long end = (p + 1) * run;
    return end < n ? end : n;
}

// sums[p] = sum over run p of (a - b)^2; counts[p] = the run's length.
extern "C" __global__ void euclidean_runs_f32(long long n, long long run, const float* a,
                                              const float* b, double* sums, double* counts) {
    GRID_STRIDE(p, (n + run - 1) / run) {
        double sum = 0.0;
        long long end = run_end(p, run, n);
        for (long long i = p * run; i < end; ++i) {
            double d = (double)a[i] - (double)b[i];
            sum += d * d;
        }
        sums[p] = sum;
        counts[p] = (double)(end - p * run);
    }
}

// dx = alpha (a - b), in double, rounded once.
extern "C" __global__ void euclidean_backward_f32(long long n, double alpha, const float* a,
                                                  const float* b, float* dx) {
    GRID_STRIDE(i, n) { dx[i] = (float)(alpha * ((double)a[i] - (double)b[i])); }
}

// Whether target t is the ignored label, truncated to an integer as Caffe
// compares it.
__device__ static bool ignored(double t, int has_ignore, int ignore) {
    return has_ignore && trunc(t) == (double)ignore;
}

// sums[p] = the cross-entropy of sigmoid(x) against t over run p (from x,
// log(1 + e^-|x|) keeping the exponent at or below 0); counts[p] = its
// targets not ignored.
extern "C" __global__ void sigmoid_cross_entropy_runs_f32(long long n, long long run,
                                                          const float* x, const float* t,
                                                          int has_ignore, int ignore,
                                                          double* sums, double* counts) {
    GRID_STRIDE(p, (n + run - 1) / run) {
        double loss = 0.0, valid = 0.0;
        long long end = run_end(p, run, n);
        for (long long i = p * run; i < end; ++i) {
            double xv = x[i], tv = t[i];
            if (ignored(tv, has_ignore, ignore)) continue;
            double positive = xv >= 0.0 ? 1.0 : 0.0;
            loss -= xv * (tv - positive) - log(1.0 + exp(xv - 2.0 * xv * positive));
            valid += 1.0;
        }
        sums[p] = loss;
        counts[p] = valid;
    }
}

// totals = (the runs' sums, their counts), each added in order;
// loss[0] = totals[0] / divisor, the counted total standing in for a
// divisor of 0 (Caffe's VALID normalization), at least 1.
extern "C" __global__ void loss_total_f32(long long runs, const double* sums,
                                          const double* counts, double divisor,
                                          double* totals, float* loss) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double sum = 0.0, count = 0.0;
    for (long long p = 0; p < runs; ++p) {
        sum += sums[p];
        count += counts[p];
    }
    totals[0] = sum;
    totals[1] = count;
    double d = divisor > 0.0 ? divisor : count;
    loss[0] = (float)(sum / (d > 1.0 ? d : 1.0));
}

// dx = (sigmoid(x) - t) weight / divisor (the forward pass's counted
// total standing in for a divisor of 0), 0 where t is ignored.
extern "C" __global__ void sigmoid_cross_entropy_backward_f32(long long n, const float* x,
                                                              const float* t, int has_ignore,
                                                              int ignore, double weight,
                                                              double divisor,
                                                              const double* totals, float* dx) {
    double d = divisor > 0.0 ? divisor : totals[1];
    double scale = weight / (d > 1.0 ? d : 1.0);
    GRID_STRIDE(i, n) {
        double tv = t[i];
        if (ignored(tv, has_ignore, ignore)) {
            dx[i] = 0.0f;
        } else {
            double p = 1.0 / (1.0 + exp(-(double)x[i]));
            dx[i] = (float)((p - tv) * scale);
        }
    }
}

// Pair j's squared distance between a and b, over its channels.
__device__ static double squared_distance(long long j, long long channels, const float* a,
                                          const float* b) {
    double d2 = 0.0;
    for (long long c = j * channels; c < (j + 1) * channels; ++c) {
        double d = (double)a[c] - (double)b[c];
        d2 += d * d;
    }
    return d2;
}

// terms[j] = pair j's contrastive term (the squared distance when similar,
// else the squared shortfall of the distance from the margin, or the
// legacy form's shortfall of the squared distance); counts[j] = 1.
extern "C" __global__ void contrastive_pairs_f32(long long pairs, long long channels,
                                                 const float* a, const float* b, const float* y,
                                                 double margin, int legacy, double* terms,
                                                 double* counts) {
    GRID_STRIDE(j, pairs) {
        double d2 = squared_distance(j, channels, a, b);
        double term;
        if (trunc((double)y[j]) != 0.0) {
            term = d2;
        } else if (legacy) {
            term = fmax(margin - d2, 0.0);
        } else {
            double d = fmax(margin - sqrt(d2), 0.0);
            term = d * d;
        }
        terms[j] = term;
        counts[j] = 1.0;
    }
}

// dx = factor (a - b) for each pair's channels: alpha when similar, else
// the margin's pull (Caffe's 1e-4 keeping the division finite at 0), 0
// once the pair is the margin apart.
extern "C" __global__ void contrastive_backward_f32(long long pairs, long long channels,
                                                    const float* a, const float* b,
                                                    const float* y, double margin, int legacy,
                                                    double alpha, float* dx) {
    GRID_STRIDE(j, pairs) {
        double d2 = squared_distance(j, channels, a, b);
        double factor;
        if (trunc((double)y[j]) != 0.0) {
            factor = alpha;
        } else {
            double mdist, beta;
            if (legacy) {
                mdist = margin - d2;
                beta = -alpha;
            } else {
                double dist = sqrt(d2);
                mdist = margin - dist;
                beta = -alpha * mdist / (dist + 1e-4);
            }
            factor = mdist > 0.0 ? beta : 0.0;
        }
        for (long long c = j * channels; c < (j + 1) * channels; ++c) {
            dx[c] = (float)(factor * ((double)a[c] - (double)b[c]));
        }
    }
}
