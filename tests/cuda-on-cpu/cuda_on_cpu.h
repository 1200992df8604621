// CUDA's built-ins for kernels compiled as C++ and run on the CPU one
// thread at a time (see build.rs). Every kernel of this workspace is a
// grid-stride loop without shared memory or barriers, so running its
// threads one after another computes what the GPU computes; atomics become
// plain adds because nothing runs beside them.
#pragma once
#include <math.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

struct cuda_on_cpu_dim3 {
    unsigned int x, y, z;
};
// Thread-local: the Rust tests run in parallel threads, each its own grid.
extern thread_local cuda_on_cpu_dim3 blockIdx, threadIdx, blockDim, gridDim;

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }

static inline float __int_as_float(int v) { float f; memcpy(&f, &v, sizeof f); return f; }
static inline int __float_as_int(float v) { int i; memcpy(&i, &v, sizeof i); return i; }
static inline long long __double_as_longlong(double v) { long long i; memcpy(&i, &v, sizeof i); return i; }
// A product or sum rounded on its own, never fused into a multiply-add
// (ISO C++ mode contracts nothing either).
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }

// No atomicAdd: the kernels add in a fixed order so that a GPU run repeats
// bit for bit; a kernel that adds with atomics does not build here.
