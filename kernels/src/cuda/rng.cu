// Helpers for cuRAND output, as Caffe's caffe_gpu_rng_* do: cuRAND draws
// on (0, 1]; these map the draws in place.

// y = a + (b - a) * u: uniform on (a, b].
extern "C" __global__ void uniform_scale_f32(long long n, float a, float b, float* y) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        y[i] = a + (b - a) * y[i];
    }
}
extern "C" __global__ void uniform_scale_f64(long long n, double a, double b, double* y) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        y[i] = a + (b - a) * y[i];
    }
}

// Bernoulli from uniform draws: 1 where u <= p (P = p for u on (0, 1]).
extern "C" __global__ void bernoulli_u32(long long n, float p, const float* u, unsigned int* y) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        y[i] = u[i] <= p ? 1u : 0u;
    }
}
