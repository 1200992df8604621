// Reduction on the GPU, as reduction/mod.rs does on the CPU: each output
// the tail it reduces summed in order in double (op 0 SUM, 1 ASUM,
// 2 SUMSQ, 3 MEAN), times `coeff`; backward each input's gradient from its
// output's.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// One thread an output.
extern "C" __global__ void reduction_forward_f32(long long outputs, long long dim, int op,
                                                 double coeff, const float* x, float* y) {
    GRID_STRIDE(o, outputs) {
        const float* tail = x + o * dim;
        double sum = 0.0;
        for (long long k = 0; k < dim; ++k) {
            double v = tail[k];
            sum += op == 1 ? fabs(v) : op == 2 ? v * v : v;
        }
        if (op == 3) {
            sum /= (double)(dim > 0 ? dim : 1);
        }
        y[o] = (float)(sum * coeff);
    }
}

// One thread an input value; `scale` is coeff, or coeff / dim for MEAN.
extern "C" __global__ void reduction_backward_f32(long long n, long long dim, int op,
                                                  double scale, const float* x,
                                                  const float* dy, float* dx) {
    GRID_STRIDE(p, n) {
        double g = (double)dy[p / dim] * scale;
        double v = x[p];
        double d = g;
        if (op == 1) {
            d = g * (double)((v > 0.0) - (v < 0.0));
        } else if (op == 2) {
            d = 2.0 * g * v;
        }
        dx[p] = (float)d;
    }
}
