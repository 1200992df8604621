// The launch half of the emulation: which thread of which block runs next.
#include "cuda_on_cpu.h"

thread_local cuda_on_cpu_dim3 blockIdx, threadIdx, blockDim, gridDim;

extern "C" void cuda_on_cpu_enter(unsigned int block, unsigned int thread, unsigned int block_dim,
                                  unsigned int grid_dim) {
    blockIdx = {block, 0, 0};
    threadIdx = {thread, 0, 0};
    blockDim = {block_dim, 1, 1};
    gridDim = {grid_dim, 1, 1};
}

// The same for a 3-D grid, as cuLaunchKernel gives it.
extern "C" void cuda_on_cpu_enter3(unsigned bx, unsigned by, unsigned bz, unsigned tx, unsigned ty,
                                   unsigned tz, unsigned bdx, unsigned bdy, unsigned bdz,
                                   unsigned gdx, unsigned gdy, unsigned gdz) {
    blockIdx = {bx, by, bz};
    threadIdx = {tx, ty, tz};
    blockDim = {bdx, bdy, bdz};
    gridDim = {gdx, gdy, gdz};
}
