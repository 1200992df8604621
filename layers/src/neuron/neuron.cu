// Caffe's element-wise layers with parameters on the GPU, as
// neuron/mod.rs computes them: in double, each result rounded to float
// once (Power's scale and shift in float, as Caffe's). Kind 0 AbsVal, 1
// Power (a power, b scale, c shift), 2 ELU (a alpha), 3 BNLL, 4 Exp (a ln
// base, b scale, c shift), 5 Log (the same), 6 Threshold (a), 7 Clip (a
// min, b max), 8 ReLU with slope a, 9 Swish (a beta), 10 ReLU6 (its
// gradient strictly inside (0, 6): in place too).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

__device__ double neuron(int kind, double a, double b, double c, double x) {
    switch (kind) {
        case 0: return fabs(x);
        case 1: {
            if (a * b == 0.0) return a == 0.0 ? 1.0 : pow(c, a);
            // Caffe's steps, each rounded to float (never fused): the
            // scale and the shift where they change something (-0 stays
            // -0), then the power.
            float t = (float)x;
            if (b != 1.0) t = __fmul_rn(t, (float)b);
            if (c != 0.0) t = __fadd_rn(t, (float)c);
            return a == 1.0 ? (double)t : pow((double)t, a);
        }
        case 2: return x > 0.0 ? x : a * expm1(x) + 0.0;  // -0 gives +0, as Caffe's sum
        case 3: return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
        case 4: return exp(a * (c + b * x));
        case 5: return log(c + b * x) / a;
        case 6: return x > a ? 1.0 : 0.0;
        case 7: return fmin(fmax(x, a), b);
        case 9: return x / (1.0 + exp(-a * x));
        case 10: return isnan(x) ? x : fmin(fmax(x, 0.0), 6.0);
        default: return x > 0.0 ? x : a * x;
    }
}

// dy f'(x), from the input x and the output y (in place x is y: the
// kinds that allow it need only its sign there, which y keeps).
__device__ double neuron_grad(int kind, double a, double b, double c, double x, double y,
                              double dy) {
    switch (kind) {
        case 0: return dy * (x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : 0.0);
        case 1:
            if (a * b == 0.0) return 0.0;
            return dy * a * b * pow(c + b * x, a - 1.0);
        case 2: return x > 0.0 ? dy : dy * (y + a);
        case 3: {
            double t = exp(fmin(x, 50.0));
            return dy * t / (t + 1.0);
        }
        case 4: return dy * y * a * b;
        case 5: return dy * b / (a * (c + b * x));
        case 6: return 0.0;
        case 7: return x >= a && x <= b ? dy : 0.0;
        case 9: {
            double s = 1.0 / (1.0 + exp(-a * x));
            return dy * (a * y + s * (1.0 - a * y));
        }
        case 10: return x > 0.0 && x < 6.0 ? dy : 0.0;
        default: return x > 0.0 ? dy : dy * a;
    }
}

extern "C" __global__ void neuron_f32(long long n, int kind, double a, double b, double c,
                                      const float* x, float* y) {
    GRID_STRIDE(i, n) { y[i] = (float)neuron(kind, a, b, c, x[i]); }
}

extern "C" __global__ void neuron_inplace_f32(long long n, int kind, double a, double b, double c,
                                              float* y) {
    GRID_STRIDE(i, n) { y[i] = (float)neuron(kind, a, b, c, y[i]); }
}

extern "C" __global__ void neuron_grad_f32(long long n, int kind, double a, double b, double c,
                                           const float* x, const float* y, const float* dy,
                                           float* dx) {
    GRID_STRIDE(i, n) { dx[i] = (float)neuron_grad(kind, a, b, c, x[i], y[i], dy[i]); }
}

// In place: the input is the output, and the gradient is overwritten.
extern "C" __global__ void neuron_grad_inplace_f32(long long n, int kind, double a, double b,
                                                   double c, const float* y, float* d) {
    GRID_STRIDE(i, n) { d[i] = (float)neuron_grad(kind, a, b, c, y[i], y[i], d[i]); }
}
