// LSTMUnit on the GPU, as recurrent/mod.rs's LstmUnitLayer does on the
// CPU, in double: one thread a hidden unit of an item, its gates (i, f, o,
// g) read from the item's 4H inputs.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

__device__ static double lstm_sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

// The unit's squashed gates.
__device__ static void lstm_gates(const float* x, long long at, long long h, double* i,
                                  double* f, double* o, double* g) {
    long long base = at / h * 4 * h + at % h;
    *i = lstm_sigmoid((double)x[base]);
    *f = lstm_sigmoid((double)x[base + h]);
    *o = lstm_sigmoid((double)x[base + 2 * h]);
    *g = tanh((double)x[base + 3 * h]);
}

// c = cont f c_prev + i g, h = o tanh(c), for the n x h units.
extern "C" __global__ void lstm_unit_forward_f32(long long units, long long h,
                                                 const float* c_prev, const float* x,
                                                 const float* cont, float* c, float* hidden) {
    GRID_STRIDE(at, units) {
        double i, f, o, g;
        lstm_gates(x, at, h, &i, &f, &o, &g);
        double cell = (double)cont[at / h] * f * (double)c_prev[at] + i * g;
        c[at] = (float)cell;
        hidden[at] = (float)(o * tanh(cell));
    }
}

// The gates' and c_prev's gradients from c's and h's.
extern "C" __global__ void lstm_unit_backward_f32(long long units, long long h,
                                                  const float* c_prev, const float* x,
                                                  const float* cont, const float* dc_top,
                                                  const float* dh_top, float* dc_prev,
                                                  float* dx) {
    GRID_STRIDE(at, units) {
        double i, f, o, g;
        lstm_gates(x, at, h, &i, &f, &o, &g);
        double keep = (double)cont[at / h];
        double prev = (double)c_prev[at];
        double tc = tanh(keep * f * prev + i * g);
        double dh = (double)dh_top[at];
        double dc = (double)dc_top[at] + dh * o * (1.0 - tc * tc);
        long long base = at / h * 4 * h + at % h;
        dx[base] = (float)(dc * g * i * (1.0 - i));
        dx[base + h] = (float)(dc * keep * prev * f * (1.0 - f));
        dx[base + 2 * h] = (float)(dh * tc * o * (1.0 - o));
        dx[base + 3 * h] = (float)(dc * i * (1.0 - g * g));
        dc_prev[at] = (float)(dc * keep * f);
    }
}
