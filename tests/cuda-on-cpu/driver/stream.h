// What the driver's parts share: the streams' queues their work goes
// through, and the checks every call makes (driver.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace cpu_cuda {

// A device pointer, as CUdeviceptr.
using DevPtr = unsigned long long;

// Queues work on `stream` (null: the default stream); it runs when the
// stream is synchronised, or when work on another stream waits for it.
// With BLOBFLOW_CPU_CUDA_SKIP_WORK set, work is dropped instead.
void enqueue(void* stream, std::function<void()> work);

// Whether BLOBFLOW_CPU_CUDA_SKIP_WORK is set: every call is checked and
// counted, no queued work runs (results are garbage), so that what is
// left of a program's time is the host's side of it.
bool skipping_work();

// Runs `stream`'s work until `upto` items of it have run.
void flush_to(void* stream, uint64_t upto);

// Runs everything queued on `stream` so far (cuStreamSynchronize).
void flush(void* stream);

// Runs every stream's work (cuCtxSynchronize).
void flush_all();

// Whether [p, p + bytes) lies in one live device allocation; says why
// not on stderr, naming `op` and `what`.
bool device_range(DevPtr p, size_t bytes, const char* op, const char* what);

// True, with the reason on stderr, where no context is current on this
// thread (or the primary context was released).
bool no_context(const char* op);

// The calls the driver counts, so that a test can hold a program's steady
// state to a budget: what a GPU makes costly (an allocation, a wait of
// the host for the device, a launch) is counted where it happens.
// `blobflow_cpu_cuda_calls` (driver.cpp) hands the counts out by name.
enum class Counter : int {
    DeviceAlloc,   // cuMemAlloc, cuMemAllocAsync
    DeviceFree,    // cuMemFree, cuMemFreeAsync
    PinnedAlloc,   // cuMemHostAlloc
    CopyToDevice,  // host to device
    CopyToHost,    // device to host
    CopyOnDevice,  // device to device
    Memset,
    Launch,        // a kernel of the workspace
    HostWait,      // the host waits for the device: a synchronisation
                   // with work still queued, a synchronous copy, a copy
                   // into pageable memory, a dot or asum
    Blas,          // a cuBLAS computation
    Rand,          // a cuRAND generation
    DnnCompute,    // a cuDNN convolution
    DnnSetup,      // a cuDNN descriptor set, heuristic or workspace query
    ModuleLoad,    // cuModuleLoadData: a kernel module
    EventCreate,   // cuEventCreate
    EventRecord,   // cuEventRecord
    EventWait,     // cuStreamWaitEvent: a stream waits for another's work
    Count_,
};
void count(Counter c);

}  // namespace cpu_cuda
