// Eltwise on the GPU, as eltwise/mod.rs computes it on the CPU: SUM with
// coefficients, PROD, and MAX with the index of the bottom that won (as a
// float, for the backward pass).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// y = c * x (SUM's first bottom; SUM's gradient to a bottom).
extern "C" __global__ void eltwise_scale_f32(long long n, float c, const float* x, float* y) {
    GRID_STRIDE(i, n) { y[i] = c * x[i]; }
}

// y += c * x (SUM's further bottoms).
extern "C" __global__ void eltwise_add_scaled_f32(long long n, float c, const float* x, float* y) {
    GRID_STRIDE(i, n) { y[i] += c * x[i]; }
}

// y *= x (PROD's further bottoms; the stable PROD gradient's factors).
extern "C" __global__ void eltwise_multiply_f32(long long n, const float* x, float* y) {
    GRID_STRIDE(i, n) { y[i] *= x[i]; }
}

// MAX of the first two bottoms: a tie goes to bottom 1 (Caffe's a > b).
extern "C" __global__ void eltwise_max_first_f32(long long n, const float* a, const float* b,
                                                 float* y, float* mask) {
    GRID_STRIDE(i, n) {
        bool first = a[i] > b[i];
        y[i] = first ? a[i] : b[i];
        mask[i] = first ? 0.0f : 1.0f;
    }
}

// MAX of a further bottom k.
extern "C" __global__ void eltwise_max_next_f32(long long n, int k, const float* x, float* y,
                                                float* mask) {
    GRID_STRIDE(i, n) {
        if (x[i] > y[i]) {
            y[i] = x[i];
            mask[i] = (float)k;
        }
    }
}

// PROD's gradient to a bottom: dy * y / x.
extern "C" __global__ void eltwise_prod_grad_f32(long long n, const float* dy, const float* y,
                                                 const float* x, float* dx) {
    GRID_STRIDE(i, n) { dx[i] = dy[i] * y[i] / x[i]; }
}

// MAX's gradient to bottom k: dy where k won, 0 elsewhere.
extern "C" __global__ void eltwise_max_grad_f32(long long n, int k, const float* dy,
                                                const float* mask, float* dx) {
    GRID_STRIDE(i, n) { dx[i] = mask[i] == (float)k ? dy[i] : 0.0f; }
}
