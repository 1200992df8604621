// The kernels the CPU driver can run: each `extern "C" __global__` kernel
// of the workspace's `.cu` files, with a thunk that takes cuLaunchKernel's
// argument array. build.rs writes the table (dispatch.cpp).
#pragma once

struct cpu_kernel {
    const char* name;
    // One letter a parameter: 'l' long long, 'i' int, 'u' unsigned int,
    // 'f' float, 'd' double, 'p' a pointer.
    const char* params;
    // Runs one thread; args[i] points at parameter i's value.
    void (*run)(void* const* args);
};

// The kernel called `name`, or null.
const cpu_kernel* cpu_kernel_named(const char* name);
