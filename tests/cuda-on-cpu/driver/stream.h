// What the driver's parts share: the one queue every stream's work goes
// through, and the checks every call makes (driver.cpp).
#pragma once

#include <cstddef>
#include <functional>

namespace cpu_cuda {

// A device pointer, as CUdeviceptr.
using DevPtr = unsigned long long;

// Queues work in stream order; it runs at the next synchronisation.
void enqueue(std::function<void()> work);

// Runs everything queued so far, in order (a stream synchronisation).
void flush();

// Whether [p, p + bytes) lies in one live device allocation; says why
// not on stderr, naming `op` and `what`.
bool device_range(DevPtr p, size_t bytes, const char* op, const char* what);

// True, with the reason on stderr, where no context is current on this
// thread (or the primary context was released).
bool no_context(const char* op);

}  // namespace cpu_cuda
