// RNN's and LSTM's step glue on the GPU (recurrent/cuda.rs): the previous
// step's hidden state masked by the continuation flags, as
// recurrent/mod.rs masks it on the CPU (cont_t h_{t-1}, one flag an item
// of h values).

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// dst[i] = src[i] * cont[i / h] over the items' `total` values.
extern "C" __global__ void mask_rows_f32(long long total, long long h, const float* src,
                                         const float* cont, float* dst) {
    GRID_STRIDE(i, total) { dst[i] = src[i] * cont[i / h]; }
}

// y[i] *= cont[i / h], in place.
extern "C" __global__ void mask_rows_inplace_f32(long long total, long long h,
                                                 const float* cont, float* y) {
    GRID_STRIDE(i, total) { y[i] *= cont[i / h]; }
}

// dx = dy (1 - tanh(x)^2) from TanH's input, in double: from its f32
// output, 1 - y^2 keeps few digits where the unit saturates.
extern "C" __global__ void tanh_backward_from_input_f32(long long n, const float* x,
                                                        const float* dy, float* dx) {
    GRID_STRIDE(i, n) {
        double t = tanh((double)x[i]);
        dx[i] = (float)((double)dy[i] * (1.0 - t * t));
    }
}
