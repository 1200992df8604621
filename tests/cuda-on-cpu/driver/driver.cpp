// A CUDA driver that runs on the CPU, for the GPU suite and the examples'
// `--device cuda` on machines without a GPU; with cuBLAS (cublas.cpp),
// cuRAND (curand.cpp) and cuDNN's convolutions (cudnn.cpp) beside it.
//
// The library is loaded by cudarc in place of libcuda.so, libcublas.so,
// libcurand.so and libcudnn.so (one file, four names), so the Rust side
// runs unchanged: every allocation, copy, launch, cuBLAS and cuDNN call
// the layers make goes through here. Kernels are the workspace's `.cu`
// files compiled as C++ (`cuda_on_cpu.h`), found by the names in the PTX
// that NVRTC produced.
//
// It is strict where a GPU would fail or misbehave, so that a mistake
// shows here first:
// - device memory starts as NaN bytes (a GPU's is not zeroed), and every
//   pointer a copy, a launch or a cuBLAS call takes must lie in a live
//   device allocation, with the extent the call reaches;
// - work is queued on its stream and runs when that stream is
//   synchronised: a host read of pinned memory before the sync sees the
//   old bytes, and work on one stream that reads what another wrote
//   without waiting on an event for it runs first, as it may on a GPU;
// - no call without a current context;
// - launches are held to the GPU's limits (1024 threads a block, grid
//   y and z below 65536, no dynamic shared memory: the kernels use none);
// - memory still held when the primary context is released (or, with
//   BLOBFLOW_CPU_CUDA_LEAK_CHECK, at exit) is a leak.

#include "dispatch.h"
#include "stream.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

extern "C" void cuda_on_cpu_enter3(unsigned bx, unsigned by, unsigned bz, unsigned tx, unsigned ty,
                                   unsigned tz, unsigned bdx, unsigned bdy, unsigned bdz,
                                   unsigned gdx, unsigned gdy, unsigned gdz);

using namespace cpu_cuda;

namespace {

// CUresult values (cuda.h).
enum : int {
    SUCCESS = 0,
    ERROR_INVALID_VALUE = 1,
    ERROR_OUT_OF_MEMORY = 2,
    ERROR_INVALID_IMAGE = 200,
    ERROR_INVALID_CONTEXT = 201,
    ERROR_UNSUPPORTED_PTX_VERSION = 222,
    ERROR_INVALID_HANDLE = 400,
    ERROR_NOT_FOUND = 500,
};

// Why a call was refused, on stderr: the Rust side sees only the code.
int refuse(int code, const std::string& why) {
    std::fprintf(stderr, "cpu CUDA driver: %s\n", why.c_str());
    return code;
}

struct Allocation {
    size_t bytes;
    bool freeing;  // a free is queued: any later use is a use after free
};

std::mutex state_lock;                         // the maps and the queues
// One flush at a time; a stream's wait on an event runs the other
// stream's work from inside a flush.
std::recursive_mutex run_lock;
std::map<uintptr_t, Allocation> device_memory; // base -> allocation
std::map<uintptr_t, size_t> pinned_memory;     // base -> bytes
// Each stream's queue (the default stream's key is null), and how much
// of it has run.
struct Stream {
    std::deque<std::function<void()>> queue;
    uint64_t queued = 0, done = 0;
};
std::map<void*, Stream> streams;
// An event: the stream it was recorded on, and the work before it.
struct Event {
    void* stream = nullptr;
    uint64_t upto = 0;
};
std::map<void*, Event> events;
// Per thread: a test counts the calls its own thread made, whatever
// the tests beside it do.
thread_local uint64_t counts[int(Counter::Count_)];
// Work this thread queued since it last waited for the device: what a
// step leaves the device to do after its last wait, while the host has
// nothing queued behind it.
thread_local uint64_t ops_since_host_wait = 0;
const char* const counter_names[int(Counter::Count_)] = {
    "device_alloc", "device_free", "pinned_alloc", "copy_to_device", "copy_to_host",
    "copy_on_device", "memset", "launch", "host_wait", "blas", "rand", "dnn_compute",
    "dnn_setup", "module_load", "event_create", "event_record", "event_wait",
};
int primary_retains = 0;                       // the primary context's count
int live_modules = 0;
thread_local bool context_bound = false;       // cuCtxSetCurrent on this thread

bool is_pinned(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> g(state_lock);
    auto it = pinned_memory.upper_bound(uintptr_t(p));
    if (it == pinned_memory.begin()) return false;
    --it;
    size_t offset = uintptr_t(p) - it->first;
    return offset <= it->second && bytes <= it->second - offset;
}

int device_alloc(DevPtr* out, size_t bytes) {
    if (no_context("cuMemAlloc")) return ERROR_INVALID_CONTEXT;
    if (out == nullptr) return ERROR_INVALID_VALUE;
    if (bytes == 0) return refuse(ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes");
    count(Counter::DeviceAlloc);
    void* p = std::malloc(bytes);
    if (p == nullptr) return ERROR_OUT_OF_MEMORY;
    // A GPU's fresh memory holds whatever was there: NaNs here, so that a
    // read of memory nobody wrote shows.
    std::memset(p, 0xff, bytes);
    {
        std::lock_guard<std::mutex> g(state_lock);
        device_memory[uintptr_t(p)] = Allocation{bytes, false};
    }
    *out = DevPtr(uintptr_t(p));
    return SUCCESS;
}

int device_free(DevPtr p, void* stream, bool queued) {
    if (no_context("cuMemFree")) return ERROR_INVALID_CONTEXT;
    {
        std::lock_guard<std::mutex> g(state_lock);
        auto it = device_memory.find(uintptr_t(p));
        if (it == device_memory.end() || it->second.freeing) {
            return refuse(ERROR_INVALID_VALUE, "cuMemFree of a pointer that is not a live allocation");
        }
        it->second.freeing = true;
    }
    count(Counter::DeviceFree);
    if (!queued) count(Counter::HostWait);
    auto release = [p] {
        {
            std::lock_guard<std::mutex> g(state_lock);
            device_memory.erase(uintptr_t(p));
        }
        std::free(reinterpret_cast<void*>(uintptr_t(p)));
    };
    if (queued && !skipping_work()) {
        enqueue(stream, release);
    } else {
        flush_all();
        release();
    }
    return SUCCESS;
}

struct Module {
    std::vector<const cpu_kernel*> kernels;
};

// The `.visible .entry` names of a PTX text.
std::vector<std::string> ptx_entries(const char* ptx) {
    std::vector<std::string> names;
    const char* mark = ".visible .entry ";
    for (const char* at = std::strstr(ptx, mark); at != nullptr; at = std::strstr(at, mark)) {
        at += std::strlen(mark);
        const char* end = at;
        while (*end != '\0' && *end != '(' && *end != ' ' && *end != '\n') ++end;
        names.emplace_back(at, end);
    }
    return names;
}

// The number of `.param` entries of kernel `name` in the PTX.
int ptx_param_count(const char* ptx, const std::string& name) {
    std::string head = ".visible .entry " + name + "(";
    const char* at = std::strstr(ptx, head.c_str());
    if (at == nullptr) return -1;
    const char* close = std::strchr(at, ')');
    int count = 0;
    for (const char* p = std::strstr(at, ".param "); p != nullptr && p < close;
         p = std::strstr(p + 1, ".param ")) {
        ++count;
    }
    return count;
}

size_t param_bytes(char kind) {
    switch (kind) {
        case 'i': case 'u': case 'f': return 4;
        default: return 8;  // 'l' long long, 'd' double, 'p' pointer
    }
}

int launch(const cpu_kernel* k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
           unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
    std::string name = std::string("cuLaunchKernel ") + k->name;
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) {
        return refuse(ERROR_INVALID_VALUE, name + ": a grid or block dimension is 0");
    }
    if (gy > 65535 || gz > 65535 || uint64_t(bx) * by * bz > 1024 || bz > 64) {
        return refuse(ERROR_INVALID_VALUE, name + ": grid or block beyond the GPU's limits");
    }
    if (shared != 0) {
        return refuse(ERROR_INVALID_VALUE, name + ": dynamic shared memory asked for; the kernels use none");
    }
    if (extra != nullptr || (params == nullptr && k->params[0] != '\0')) {
        return refuse(ERROR_INVALID_VALUE, name + ": parameters not passed as kernelParams");
    }
    count(Counter::Launch);
    // The driver copies the arguments at launch: the caller's may be gone
    // when the kernel runs.
    size_t n = std::strlen(k->params);
    std::vector<uint64_t> values(n, 0);
    for (size_t i = 0; i < n; ++i) {
        std::memcpy(&values[i], params[i], param_bytes(k->params[i]));
        if (k->params[i] == 'p' && !device_range(values[i], 0, name.c_str(),
                                                   ("parameter " + std::to_string(i)).c_str())) {
            return ERROR_INVALID_VALUE;
        }
    }
    enqueue(stream, [k, values, gx, gy, gz, bx, by, bz] {
        std::vector<void*> args(values.size());
        for (size_t i = 0; i < values.size(); ++i) args[i] = const_cast<uint64_t*>(&values[i]);
        for (unsigned z = 0; z < gz; ++z)
            for (unsigned y = 0; y < gy; ++y)
                for (unsigned x = 0; x < gx; ++x)
                    for (unsigned tz = 0; tz < bz; ++tz)
                        for (unsigned ty = 0; ty < by; ++ty)
                            for (unsigned tx = 0; tx < bx; ++tx) {
                                cuda_on_cpu_enter3(x, y, z, tx, ty, tz, bx, by, bz, gx, gy, gz);
                                k->run(args.data());
                            }
    });
    return SUCCESS;
}

// Whether `stream` (or, with `any`, some stream) has work that has not
// run: a synchronisation then makes the host wait (a host wait is counted
// only then; one with nothing left to run returns at once on a GPU too).
bool pending(void* stream, bool any) {
    std::lock_guard<std::mutex> g(state_lock);
    if (!any) return streams[stream].done < streams[stream].queued;
    for (auto& [handle, st] : streams) {
        (void)handle;
        if (st.done < st.queued) return true;
    }
    return false;
}

int primary_context = 0;  // its address is the handle: there is one device
int event_handles = 0;

// What is still allocated when the last retain of the primary context is
// released, or at exit: the driver frees it with the context, so it is a
// leak in the program, as compute-sanitizer's leak check reports it.
void check_leaks(const char* when) {
    size_t device_bytes = 0, device_count = 0, pinned_count = 0;
    int modules;
    {
        std::lock_guard<std::mutex> g(state_lock);
        for (auto& [base, a] : device_memory) {
            (void)base;
            device_bytes += a.bytes;
            ++device_count;
        }
        pinned_count = pinned_memory.size();
        modules = live_modules;
    }
    if (device_count + pinned_count + size_t(modules) == 0) return;
    std::fprintf(stderr,
                 "cpu CUDA driver: %s with %zu device allocations (%zu bytes), %zu pinned host "
                 "allocations and %d modules still live: a leak\n",
                 when, device_count, device_bytes, pinned_count, modules);
    std::_Exit(1);
}

// With BLOBFLOW_CPU_CUDA_LEAK_CHECK set, the check runs at exit too (a
// leaked buffer keeps its context retained, so the release never comes):
// for programs that free everything before they exit, as the GPU suite.
struct LeakCheckAtExit {
    ~LeakCheckAtExit() {
        if (std::getenv("BLOBFLOW_CPU_CUDA_LEAK_CHECK") != nullptr) {
            flush_all();
            check_leaks("the program exited");
        }
    }
} leak_check_at_exit;

}  // namespace

namespace cpu_cuda {

bool skipping_work() {
    static const bool skip = std::getenv("BLOBFLOW_CPU_CUDA_SKIP_WORK") != nullptr;
    return skip;
}

void count(Counter c) {
    ++counts[int(c)];
    switch (c) {
        case Counter::HostWait: ops_since_host_wait = 0; break;
        case Counter::CopyToDevice:
        case Counter::CopyOnDevice:
        case Counter::Memset:
        case Counter::Launch:
        case Counter::Blas:
        case Counter::Rand:
        case Counter::DnnCompute: ++ops_since_host_wait; break;
        default: break;
    }
    // BLOBFLOW_CPU_CUDA_TRACE: each counted call on stderr, in order.
    static const bool trace = std::getenv("BLOBFLOW_CPU_CUDA_TRACE") != nullptr;
    if (trace) std::fprintf(stderr, "cpu CUDA driver: %s\n", counter_names[int(c)]);
}

void enqueue(void* stream, std::function<void()> work) {
    if (skipping_work()) return;
    std::lock_guard<std::mutex> g(state_lock);
    Stream& st = streams[stream];
    st.queue.push_back(std::move(work));
    ++st.queued;
}

// Runs `stream`'s work until `upto` items of it have run.
void flush_to(void* stream, uint64_t upto) {
    std::lock_guard<std::recursive_mutex> running(run_lock);
    for (;;) {
        std::function<void()> work;
        {
            std::lock_guard<std::mutex> g(state_lock);
            Stream& st = streams[stream];
            if (st.done >= upto || st.queue.empty()) return;
            work = std::move(st.queue.front());
            st.queue.pop_front();
            ++st.done;
        }
        work();
    }
}

void flush(void* stream) {
    uint64_t upto;
    {
        std::lock_guard<std::mutex> g(state_lock);
        upto = streams[stream].queued;
    }
    flush_to(stream, upto);
}

void flush_all() {
    std::vector<void*> all;
    {
        std::lock_guard<std::mutex> g(state_lock);
        for (auto& [handle, st] : streams) {
            (void)st;
            all.push_back(handle);
        }
    }
    for (void* stream : all) flush(stream);
}

// Whether [p, p + bytes) lies in one live device allocation; `what` and
// `op` name it in the refusal.
bool device_range(DevPtr p, size_t bytes, const char* op, const char* what) {
    std::lock_guard<std::mutex> g(state_lock);
    auto it = device_memory.upper_bound(uintptr_t(p));
    if (it != device_memory.begin()) {
        --it;
        size_t offset = uintptr_t(p) - it->first;
        if (!it->second.freeing && offset <= it->second.bytes && bytes <= it->second.bytes - offset) {
            return true;
        }
        if (it->second.freeing && offset < it->second.bytes) {
            refuse(ERROR_INVALID_VALUE,
                   std::string(op) + ": " + what + " is device memory whose free is queued");
            return false;
        }
    }
    char at[32];
    std::snprintf(at, sizeof at, "0x%llx", p);
    refuse(ERROR_INVALID_VALUE, std::string(op) + ": " + what + " (" + std::to_string(bytes) +
                                    " bytes at " + at + ") is not inside one live device allocation");
    return false;
}

// As the driver, refuses a call on a thread with no current context, or
// after the primary context was released.
bool no_context(const char* op) {
    bool retained;
    {
        std::lock_guard<std::mutex> g(state_lock);
        retained = primary_retains > 0;
    }
    if (context_bound && retained) return false;
    refuse(ERROR_INVALID_CONTEXT, std::string(op) + ": no CUDA context is current on this thread");
    return true;
}

namespace {

// CUDA 13.0 (driver 580), unless BLOBFLOW_CPU_CUDA_DRIVER_VERSION gives
// another (as cuDriverGetVersion reports it: 12040 is 12.4), to show PTX
// newer than a driver loads.
int driver_version() {
    const char* version = std::getenv("BLOBFLOW_CPU_CUDA_DRIVER_VERSION");
    return version != nullptr ? std::atoi(version) : 13000;
}

// Whether a driver of `driver_version` JIT-compiles the PTX: CUDA 11.x
// reads PTX ISA 7.x, 12.x reads 8.x, 13.x reads 9.x, each up to its minor.
bool ptx_isa_supported(const char* ptx) {
    const char* at = std::strstr(ptx, ".version");
    int major = 0;
    int minor = 0;
    if (at == nullptr || std::sscanf(at, ".version %d.%d", &major, &minor) != 2) return false;
    int cuda = driver_version();
    int most_major = cuda / 1000 - 4;
    int most_minor = cuda % 1000 / 10;
    return major < most_major || (major == most_major && minor <= most_minor);
}

}  // namespace

}  // namespace cpu_cuda

// ---------------------------------------------------------------- driver

extern "C" {

int cuInit(unsigned) { return SUCCESS; }
int cuDriverGetVersion(int* v) { *v = driver_version(); return SUCCESS; }
int cuDeviceGetCount(int* count) { *count = 1; return SUCCESS; }
int cuDeviceGet(int* device, int ordinal) {
    if (ordinal != 0) return ERROR_INVALID_VALUE;
    *device = 0;
    return SUCCESS;
}
int cuDeviceGetName(char* name, int len, int) {
    std::snprintf(name, size_t(len), "blobflow's CPU CUDA driver");
    return SUCCESS;
}
int cuDeviceGetAttribute(int* value, int attribute, int) {
    switch (attribute) {
        case 1: *value = 1024; break;             // max threads per block
        case 75: *value = 9; break;               // compute capability major
        case 76: *value = 0; break;               // minor
        case 115: *value = 1; break;              // memory pools: cuMemAllocAsync
        default: *value = 0;
    }
    return SUCCESS;
}
int cuDeviceTotalMem_v2(size_t* bytes, int) { *bytes = size_t(1) << 34; return SUCCESS; }
int cuMemGetInfo_v2(size_t* free, size_t* total) {
    *free = *total = size_t(1) << 34;
    return SUCCESS;
}
int cuDevicePrimaryCtxRetain(void** ctx, int) {
    std::lock_guard<std::mutex> g(state_lock);
    ++primary_retains;
    *ctx = &primary_context;
    return SUCCESS;
}
int cuDevicePrimaryCtxRelease_v2(int) {
    flush_all();
    int left;
    {
        std::lock_guard<std::mutex> g(state_lock);
        if (primary_retains == 0) return refuse(ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease: not retained");
        left = --primary_retains;
    }
    if (left == 0) check_leaks("the context was released");
    return SUCCESS;
}
int cuCtxSetCurrent(void* ctx) {
    if (ctx != nullptr && ctx != &primary_context) return ERROR_INVALID_CONTEXT;
    context_bound = ctx != nullptr;
    return SUCCESS;
}
int cuCtxGetCurrent(void** ctx) { *ctx = context_bound ? &primary_context : nullptr; return SUCCESS; }
int cuCtxGetDevice(int* device) { *device = 0; return SUCCESS; }
int cuCtxSynchronize() {
    if (no_context("cuCtxSynchronize")) return ERROR_INVALID_CONTEXT;
    if (pending(nullptr, true)) count(Counter::HostWait);
    flush_all();
    return SUCCESS;
}

int cuGetErrorName(int error, const char** out) {
    static thread_local std::string name;
    name = "CUDA_ERROR_" + std::to_string(error);
    *out = name.c_str();
    return SUCCESS;
}
int cuGetErrorString(int error, const char** out) {
    static thread_local std::string text;
    text = "refused by the CPU CUDA driver (code " + std::to_string(error) + "; the reason is on stderr)";
    *out = text.c_str();
    return SUCCESS;
}

int cuStreamCreate(void** stream, unsigned) {
    if (no_context("cuStreamCreate")) return ERROR_INVALID_CONTEXT;
    *stream = new int(0);
    return SUCCESS;
}
int cuStreamCreateWithPriority(void** stream, unsigned flags, int) { return cuStreamCreate(stream, flags); }
int cuStreamDestroy_v2(void* stream) {
    if (no_context("cuStreamDestroy")) return ERROR_INVALID_CONTEXT;
    flush(stream);  // as the driver: its work completes first
    {
        std::lock_guard<std::mutex> g(state_lock);
        streams.erase(stream);
    }
    delete static_cast<int*>(stream);
    return SUCCESS;
}
int cuStreamSynchronize(void* stream) {
    if (no_context("cuStreamSynchronize")) return ERROR_INVALID_CONTEXT;
    if (pending(stream, false)) count(Counter::HostWait);
    flush(stream);
    return SUCCESS;
}
// The stream's later work runs only once the event's stream has run up
// to the event: without such a wait, work on two streams runs in
// whatever order their synchronisations come, as a GPU may run it.
int cuStreamWaitEvent(void* stream, void* event, unsigned) {
    if (no_context("cuStreamWaitEvent")) return ERROR_INVALID_CONTEXT;
    count(Counter::EventWait);
    Event e;
    {
        std::lock_guard<std::mutex> g(state_lock);
        e = events[event];
    }
    enqueue(stream, [e] { flush_to(e.stream, e.upto); });
    return SUCCESS;
}

int cuEventCreate(void** event, unsigned) {
    if (no_context("cuEventCreate")) return ERROR_INVALID_CONTEXT;
    count(Counter::EventCreate);
    std::lock_guard<std::mutex> g(state_lock);
    *event = reinterpret_cast<void*>(uintptr_t(++event_handles) << 4);
    events[*event] = Event{};
    return SUCCESS;
}
int cuEventDestroy_v2(void* event) {
    std::lock_guard<std::mutex> g(state_lock);
    events.erase(event);
    return SUCCESS;
}
int cuEventRecord(void* event, void* stream) {
    count(Counter::EventRecord);
    std::lock_guard<std::mutex> g(state_lock);
    events[event] = Event{stream, streams[stream].queued};
    return SUCCESS;
}
int cuEventSynchronize(void* event) {
    Event e;
    {
        std::lock_guard<std::mutex> g(state_lock);
        e = events[event];
        if (streams[e.stream].done < e.upto) count(Counter::HostWait);
    }
    flush_to(e.stream, e.upto);
    return SUCCESS;
}
int cuEventQuery(void* event) { return cuEventSynchronize(event); }
int cuEventElapsedTime_v2(float* ms, void* start, void* end) {
    cuEventSynchronize(start);
    cuEventSynchronize(end);
    *ms = 0.0f;
    return SUCCESS;
}
int cuEventElapsedTime(float* ms, void* a, void* b) { return cuEventElapsedTime_v2(ms, a, b); }

int cuMemAlloc_v2(DevPtr* p, size_t bytes) { return device_alloc(p, bytes); }
int cuMemAllocAsync(DevPtr* p, size_t bytes, void*) { return device_alloc(p, bytes); }
int cuMemFree_v2(DevPtr p) { return device_free(p, nullptr, false); }
int cuMemFreeAsync(DevPtr p, void* stream) { return device_free(p, stream, true); }

int cuMemHostAlloc(void** p, size_t bytes, unsigned) {
    if (no_context("cuMemHostAlloc")) return ERROR_INVALID_CONTEXT;
    if (bytes == 0) return refuse(ERROR_INVALID_VALUE, "cuMemHostAlloc of 0 bytes");
    count(Counter::PinnedAlloc);
    void* mem = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (mem == nullptr) return ERROR_OUT_OF_MEMORY;
    std::memset(mem, 0xff, bytes);
    std::lock_guard<std::mutex> g(state_lock);
    pinned_memory[uintptr_t(mem)] = bytes;
    *p = mem;
    return SUCCESS;
}
int cuMemFreeHost(void* p) {
    if (no_context("cuMemFreeHost")) return ERROR_INVALID_CONTEXT;
    flush_all();  // as cuMemFreeHost: no queued copy still reads or writes it
    {
        std::lock_guard<std::mutex> g(state_lock);
        if (pinned_memory.erase(uintptr_t(p)) == 0) {
            return refuse(ERROR_INVALID_VALUE, "cuMemFreeHost of memory cuMemHostAlloc did not give");
        }
    }
    std::free(p);
    return SUCCESS;
}

int cuMemcpyHtoDAsync_v2(DevPtr dst, const void* src, size_t bytes, void* stream) {
    if (no_context("cuMemcpyHtoD")) return ERROR_INVALID_CONTEXT;
    if (!device_range(dst, bytes, "cuMemcpyHtoDAsync", "the destination")) return ERROR_INVALID_VALUE;
    count(Counter::CopyToDevice);
    void* to = reinterpret_cast<void*>(uintptr_t(dst));
    if (is_pinned(src, bytes)) {
        // Read when the copy runs: the host must not touch it before.
        enqueue(stream, [to, src, bytes] { std::memcpy(to, src, bytes); });
    } else {
        // From pageable memory the driver stages the bytes before it
        // returns.
        std::vector<unsigned char> staged(static_cast<const unsigned char*>(src),
                                          static_cast<const unsigned char*>(src) + bytes);
        enqueue(stream, [to, staged] { std::memcpy(to, staged.data(), staged.size()); });
    }
    return SUCCESS;
}
int cuMemcpyDtoHAsync_v2(void* dst, DevPtr src, size_t bytes, void* stream) {
    if (no_context("cuMemcpyDtoH")) return ERROR_INVALID_CONTEXT;
    if (!device_range(src, bytes, "cuMemcpyDtoHAsync", "the source")) return ERROR_INVALID_VALUE;
    count(Counter::CopyToHost);
    const void* from = reinterpret_cast<const void*>(uintptr_t(src));
    if (is_pinned(dst, bytes)) {
        // Written when the copy runs: the host sees it after a sync.
        enqueue(stream, [dst, from, bytes] { std::memcpy(dst, from, bytes); });
    } else {
        // Into pageable memory the call returns once the copy is done.
        count(Counter::HostWait);
        flush(stream);
        std::memcpy(dst, from, bytes);
    }
    return SUCCESS;
}
int cuMemcpyDtoDAsync_v2(DevPtr dst, DevPtr src, size_t bytes, void* stream) {
    if (no_context("cuMemcpyDtoD")) return ERROR_INVALID_CONTEXT;
    if (!device_range(dst, bytes, "cuMemcpyDtoDAsync", "the destination") ||
        !device_range(src, bytes, "cuMemcpyDtoDAsync", "the source")) {
        return ERROR_INVALID_VALUE;
    }
    count(Counter::CopyOnDevice);
    enqueue(stream, [dst, src, bytes] {
        std::memmove(reinterpret_cast<void*>(uintptr_t(dst)),
                     reinterpret_cast<const void*>(uintptr_t(src)), bytes);
    });
    return SUCCESS;
}
int cuMemcpyHtoD_v2(DevPtr dst, const void* src, size_t bytes) {
    flush_all();
    count(Counter::HostWait);
    int r = cuMemcpyHtoDAsync_v2(dst, src, bytes, nullptr);
    flush_all();
    return r;
}
int cuMemcpyDtoH_v2(void* dst, DevPtr src, size_t bytes) {
    flush_all();
    count(Counter::HostWait);
    int r = cuMemcpyDtoHAsync_v2(dst, src, bytes, nullptr);
    flush_all();
    return r;
}
int cuMemcpyDtoD_v2(DevPtr dst, DevPtr src, size_t bytes) {
    count(Counter::HostWait);
    int r = cuMemcpyDtoDAsync_v2(dst, src, bytes, nullptr);
    flush_all();
    return r;
}
int cuMemsetD8Async(DevPtr dst, unsigned char value, size_t bytes, void* stream) {
    if (no_context("cuMemsetD8")) return ERROR_INVALID_CONTEXT;
    if (!device_range(dst, bytes, "cuMemsetD8Async", "the destination")) return ERROR_INVALID_VALUE;
    count(Counter::Memset);
    enqueue(stream, [dst, value, bytes] { std::memset(reinterpret_cast<void*>(uintptr_t(dst)), value, bytes); });
    return SUCCESS;
}
int cuMemsetD8_v2(DevPtr dst, unsigned char value, size_t bytes) {
    count(Counter::HostWait);
    int r = cuMemsetD8Async(dst, value, bytes, nullptr);
    flush_all();
    return r;
}

int cuModuleLoadData(void** module, const void* image) {
    if (no_context("cuModuleLoadData")) return ERROR_INVALID_CONTEXT;
    const char* ptx = static_cast<const char*>(image);
    if (std::strstr(ptx, ".version") == nullptr) {
        return refuse(ERROR_INVALID_IMAGE, "cuModuleLoadData: the image is not PTX text");
    }
    if (!ptx_isa_supported(ptx)) {
        return refuse(ERROR_UNSUPPORTED_PTX_VERSION,
                      "cuModuleLoadData: the PTX's ISA is newer than this driver's CUDA " +
                          std::to_string(driver_version()));
    }
    count(Counter::ModuleLoad);
    auto* m = new Module;
    for (const std::string& name : ptx_entries(ptx)) {
        const cpu_kernel* k = cpu_kernel_named(name.c_str());
        if (k == nullptr) {
            delete m;
            return refuse(ERROR_NOT_FOUND, "cuModuleLoadData: kernel " + name +
                                               " of the PTX is not among the .cu files built here");
        }
        int in_ptx = ptx_param_count(ptx, name);
        if (in_ptx != int(std::strlen(k->params))) {
            delete m;
            return refuse(ERROR_INVALID_IMAGE, "cuModuleLoadData: kernel " + name + " takes " +
                                                   std::to_string(in_ptx) + " parameters in the PTX, " +
                                                   std::to_string(std::strlen(k->params)) +
                                                   " in its source");
        }
        m->kernels.push_back(k);
    }
    *module = m;
    std::lock_guard<std::mutex> g(state_lock);
    ++live_modules;
    return SUCCESS;
}
int cuModuleUnload(void* module) {
    if (no_context("cuModuleUnload")) return ERROR_INVALID_CONTEXT;
    flush_all();
    delete static_cast<Module*>(module);
    std::lock_guard<std::mutex> g(state_lock);
    --live_modules;
    return SUCCESS;
}
int cuModuleGetFunction(void** function, void* module, const char* name) {
    if (no_context("cuModuleGetFunction")) return ERROR_INVALID_CONTEXT;
    for (const cpu_kernel* k : static_cast<Module*>(module)->kernels) {
        if (std::strcmp(k->name, name) == 0) {
            *function = const_cast<cpu_kernel*>(k);
            return SUCCESS;
        }
    }
    return refuse(ERROR_NOT_FOUND, std::string("cuModuleGetFunction: no kernel ") + name + " in the module");
}
int cuFuncGetAttribute(int* value, int, void*) { *value = 0; return SUCCESS; }
int cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
    if (no_context("cuLaunchKernel")) return ERROR_INVALID_CONTEXT;
    if (function == nullptr) return ERROR_INVALID_HANDLE;
    return launch(static_cast<const cpu_kernel*>(function), gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

// The counts of the calls this thread made, of those the driver counts
// (stream.h), for a test that holds a program's steady state to a
// budget: writes up to `n` of them
// into `out` and returns how many there are; `blobflow_cpu_cuda_call_name`
// names each. Not a CUDA call: a program finds it only on this driver.
size_t blobflow_cpu_cuda_calls(uint64_t* out, size_t n) {
    for (size_t i = 0; i < n && i < size_t(Counter::Count_); ++i) {
        out[i] = counts[i];
    }
    return size_t(Counter::Count_);
}
const char* blobflow_cpu_cuda_call_name(size_t i) {
    return i < size_t(Counter::Count_) ? counter_names[i] : nullptr;
}
// Device work (copies to or on the device, memsets, launches, cuBLAS,
// cuRAND and cuDNN computations) this thread queued since its last host
// wait.
uint64_t blobflow_cpu_cuda_ops_since_host_wait() { return ops_since_host_wait; }

}  // extern "C"

