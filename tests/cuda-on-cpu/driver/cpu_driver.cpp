// A CUDA driver, cuBLAS, cuRAND and cuDNN's convolutions that run on the
// CPU, for the GPU suite and the examples' `--device cuda` on machines
// without a GPU.
//
// The library is loaded by cudarc in place of libcuda.so, libcublas.so,
// libcurand.so and libcudnn.so (one file, four names), so the Rust side
// runs unchanged: every allocation, copy, launch, cuBLAS and cuDNN call the
// layers make goes through here. Kernels are the workspace's `.cu` files compiled as C++
// (`cuda_on_cpu.h`), found by the names in the PTX that NVRTC produced.
//
// It is strict where a GPU would fail or misbehave, so that a mistake
// shows here first:
// - device memory starts as NaN bytes (a GPU's is not zeroed), and every
//   pointer a copy, a launch or a cuBLAS call takes must lie in a live
//   device allocation, with the extent the call reaches;
// - work is queued and runs at the next synchronisation, as on a stream:
//   a host read of pinned memory before the stream is synchronised sees
//   the old bytes, as it may on a GPU;
// - launches are held to the GPU's limits (1024 threads a block, grid
//   y and z below 65536, no dynamic shared memory: the kernels use none).
// One queue serves every stream, so ordering between streams is stronger
// here than on a GPU.

#include "dispatch.h"

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

namespace {

// CUresult values (cuda.h).
enum : int {
    SUCCESS = 0,
    ERROR_INVALID_VALUE = 1,
    ERROR_OUT_OF_MEMORY = 2,
    ERROR_INVALID_IMAGE = 200,
    ERROR_INVALID_CONTEXT = 201,
    ERROR_INVALID_HANDLE = 400,
    ERROR_NOT_FOUND = 500,
    ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    ERROR_NOT_SUPPORTED = 801,
};

using DevPtr = unsigned long long;

// Why a call was refused, on stderr: the Rust side sees only the code.
int refuse(int code, const std::string& why) {
    std::fprintf(stderr, "cpu CUDA driver: %s\n", why.c_str());
    return code;
}

struct Allocation {
    size_t bytes;
    bool freeing;  // a free is queued: any later use is a use after free
};

std::mutex state_lock;                         // the maps and the queue
std::mutex run_lock;                           // one flush at a time
std::map<uintptr_t, Allocation> device_memory; // base -> allocation
std::map<uintptr_t, size_t> pinned_memory;     // base -> bytes
std::deque<std::function<void()>> queue;
int primary_retains = 0;                       // the primary context's count
int live_modules = 0;
thread_local bool context_bound = false;       // cuCtxSetCurrent on this thread

void enqueue(std::function<void()> work) {
    std::lock_guard<std::mutex> g(state_lock);
    queue.push_back(std::move(work));
}

// Runs everything queued so far, in order (a stream synchronisation).
void flush() {
    std::lock_guard<std::mutex> running(run_lock);
    for (;;) {
        std::function<void()> work;
        {
            std::lock_guard<std::mutex> g(state_lock);
            if (queue.empty()) return;
            work = std::move(queue.front());
            queue.pop_front();
        }
        work();
    }
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

bool is_pinned(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> g(state_lock);
    auto it = pinned_memory.upper_bound(uintptr_t(p));
    if (it == pinned_memory.begin()) return false;
    --it;
    size_t offset = uintptr_t(p) - it->first;
    return offset <= it->second && bytes <= it->second - offset;
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

int device_alloc(DevPtr* out, size_t bytes) {
    if (no_context("cuMemAlloc")) return ERROR_INVALID_CONTEXT;
    if (out == nullptr) return ERROR_INVALID_VALUE;
    if (bytes == 0) return refuse(ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes");
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

int device_free(DevPtr p, bool queued) {
    if (no_context("cuMemFree")) return ERROR_INVALID_CONTEXT;
    {
        std::lock_guard<std::mutex> g(state_lock);
        auto it = device_memory.find(uintptr_t(p));
        if (it == device_memory.end() || it->second.freeing) {
            return refuse(ERROR_INVALID_VALUE, "cuMemFree of a pointer that is not a live allocation");
        }
        it->second.freeing = true;
    }
    auto release = [p] {
        {
            std::lock_guard<std::mutex> g(state_lock);
            device_memory.erase(uintptr_t(p));
        }
        std::free(reinterpret_cast<void*>(uintptr_t(p)));
    };
    if (queued) {
        enqueue(release);
    } else {
        flush();
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
           unsigned bz, unsigned shared, void** params, void** extra) {
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
    enqueue([k, values, gx, gy, gz, bx, by, bz] {
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
            flush();
            check_leaks("the program exited");
        }
    }
} leak_check_at_exit;

}  // namespace

// ---------------------------------------------------------------- driver

extern "C" {

int cuInit(unsigned) { return SUCCESS; }
int cuDriverGetVersion(int* v) { *v = 13000; return SUCCESS; }
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
    flush();
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
    flush();
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
    flush();
    delete static_cast<int*>(stream);
    return SUCCESS;
}
int cuStreamSynchronize(void*) {
    if (no_context("cuStreamSynchronize")) return ERROR_INVALID_CONTEXT;
    flush();
    return SUCCESS;
}
int cuStreamWaitEvent(void*, void*, unsigned) { return SUCCESS; }

int cuEventCreate(void** event, unsigned) {
    if (no_context("cuEventCreate")) return ERROR_INVALID_CONTEXT;
    std::lock_guard<std::mutex> g(state_lock);
    *event = reinterpret_cast<void*>(uintptr_t(++event_handles) << 4);
    return SUCCESS;
}
int cuEventDestroy_v2(void*) { return SUCCESS; }
int cuEventRecord(void*, void*) { return SUCCESS; }
int cuEventSynchronize(void*) { flush(); return SUCCESS; }
int cuEventQuery(void*) { flush(); return SUCCESS; }
int cuEventElapsedTime_v2(float* ms, void*, void*) { flush(); *ms = 0.0f; return SUCCESS; }
int cuEventElapsedTime(float* ms, void* a, void* b) { return cuEventElapsedTime_v2(ms, a, b); }

int cuMemAlloc_v2(DevPtr* p, size_t bytes) { return device_alloc(p, bytes); }
int cuMemAllocAsync(DevPtr* p, size_t bytes, void*) { return device_alloc(p, bytes); }
int cuMemFree_v2(DevPtr p) { return device_free(p, false); }
int cuMemFreeAsync(DevPtr p, void*) { return device_free(p, true); }

int cuMemHostAlloc(void** p, size_t bytes, unsigned) {
    if (no_context("cuMemHostAlloc")) return ERROR_INVALID_CONTEXT;
    if (bytes == 0) return refuse(ERROR_INVALID_VALUE, "cuMemHostAlloc of 0 bytes");
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
    flush();  // as cuMemFreeHost: no queued copy still reads or writes it
    {
        std::lock_guard<std::mutex> g(state_lock);
        if (pinned_memory.erase(uintptr_t(p)) == 0) {
            return refuse(ERROR_INVALID_VALUE, "cuMemFreeHost of memory cuMemHostAlloc did not give");
        }
    }
    std::free(p);
    return SUCCESS;
}

int cuMemcpyHtoDAsync_v2(DevPtr dst, const void* src, size_t bytes, void*) {
    if (no_context("cuMemcpyHtoD")) return ERROR_INVALID_CONTEXT;
    if (!device_range(dst, bytes, "cuMemcpyHtoDAsync", "the destination")) return ERROR_INVALID_VALUE;
    void* to = reinterpret_cast<void*>(uintptr_t(dst));
    if (is_pinned(src, bytes)) {
        // Read when the copy runs: the host must not touch it before.
        enqueue([to, src, bytes] { std::memcpy(to, src, bytes); });
    } else {
        // From pageable memory the driver stages the bytes before it
        // returns.
        std::vector<unsigned char> staged(static_cast<const unsigned char*>(src),
                                          static_cast<const unsigned char*>(src) + bytes);
        enqueue([to, staged] { std::memcpy(to, staged.data(), staged.size()); });
    }
    return SUCCESS;
}
int cuMemcpyDtoHAsync_v2(void* dst, DevPtr src, size_t bytes, void*) {
    if (no_context("cuMemcpyDtoH")) return ERROR_INVALID_CONTEXT;
    if (!device_range(src, bytes, "cuMemcpyDtoHAsync", "the source")) return ERROR_INVALID_VALUE;
    const void* from = reinterpret_cast<const void*>(uintptr_t(src));
    if (is_pinned(dst, bytes)) {
        // Written when the copy runs: the host sees it after a sync.
        enqueue([dst, from, bytes] { std::memcpy(dst, from, bytes); });
    } else {
        // Into pageable memory the call returns once the copy is done.
        flush();
        std::memcpy(dst, from, bytes);
    }
    return SUCCESS;
}
int cuMemcpyDtoDAsync_v2(DevPtr dst, DevPtr src, size_t bytes, void*) {
    if (no_context("cuMemcpyDtoD")) return ERROR_INVALID_CONTEXT;
    if (!device_range(dst, bytes, "cuMemcpyDtoDAsync", "the destination") ||
        !device_range(src, bytes, "cuMemcpyDtoDAsync", "the source")) {
        return ERROR_INVALID_VALUE;
    }
    enqueue([dst, src, bytes] {
        std::memmove(reinterpret_cast<void*>(uintptr_t(dst)),
                     reinterpret_cast<const void*>(uintptr_t(src)), bytes);
    });
    return SUCCESS;
}
int cuMemcpyHtoD_v2(DevPtr dst, const void* src, size_t bytes) {
    flush();
    int r = cuMemcpyHtoDAsync_v2(dst, src, bytes, nullptr);
    flush();
    return r;
}
int cuMemcpyDtoH_v2(void* dst, DevPtr src, size_t bytes) {
    flush();
    int r = cuMemcpyDtoHAsync_v2(dst, src, bytes, nullptr);
    flush();
    return r;
}
int cuMemcpyDtoD_v2(DevPtr dst, DevPtr src, size_t bytes) {
    int r = cuMemcpyDtoDAsync_v2(dst, src, bytes, nullptr);
    flush();
    return r;
}
int cuMemsetD8Async(DevPtr dst, unsigned char value, size_t bytes, void*) {
    if (no_context("cuMemsetD8")) return ERROR_INVALID_CONTEXT;
    if (!device_range(dst, bytes, "cuMemsetD8Async", "the destination")) return ERROR_INVALID_VALUE;
    enqueue([dst, value, bytes] { std::memset(reinterpret_cast<void*>(uintptr_t(dst)), value, bytes); });
    return SUCCESS;
}
int cuMemsetD8_v2(DevPtr dst, unsigned char value, size_t bytes) {
    int r = cuMemsetD8Async(dst, value, bytes, nullptr);
    flush();
    return r;
}

int cuModuleLoadData(void** module, const void* image) {
    if (no_context("cuModuleLoadData")) return ERROR_INVALID_CONTEXT;
    const char* ptx = static_cast<const char*>(image);
    if (std::strstr(ptx, ".version") == nullptr) {
        return refuse(ERROR_INVALID_IMAGE, "cuModuleLoadData: the image is not PTX text");
    }
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
    flush();
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
                   unsigned bz, unsigned shared, void*, void** params, void** extra) {
    if (no_context("cuLaunchKernel")) return ERROR_INVALID_CONTEXT;
    if (function == nullptr) return ERROR_INVALID_HANDLE;
    return launch(static_cast<const cpu_kernel*>(function), gx, gy, gz, bx, by, bz, shared, params, extra);
}

}  // extern "C"

// ---------------------------------------------------------------- cuBLAS
//
// Column-major, as cuBLAS. Each operand's extent (the elements its leading
// dimension and size reach) must lie in its allocation.

namespace {

enum : int { BLAS_SUCCESS = 0, BLAS_NOT_INITIALIZED = 1, BLAS_INVALID_VALUE = 7 };

struct BlasHandle {
    int pointer_mode = 0;  // host
};

int blas_refuse(const std::string& why) {
    std::fprintf(stderr, "cpu cuBLAS: %s\n", why.c_str());
    return BLAS_INVALID_VALUE;
}

// Elements a column-major rows x cols operand with leading dimension ld
// reaches.
size_t extent(long rows, long cols, long ld) {
    if (rows == 0 || cols == 0) return 0;
    return size_t(ld) * size_t(cols - 1) + size_t(rows);
}

template <typename T>
bool operand(const T* p, size_t elements, const char* op, const char* what) {
    return device_range(DevPtr(uintptr_t(p)), elements * sizeof(T), op, what);
}

template <typename T>
int gemm(void* h, int ta, int tb, int m, int n, int k, const T* alpha, const T* a, int lda,
         const T* b, int ldb, const T* beta, T* c, int ldc) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    if (static_cast<BlasHandle*>(h)->pointer_mode != 0) return blas_refuse("gemm: device pointer mode");
    if (ta < 0 || ta > 2 || tb < 0 || tb > 2 || m < 0 || n < 0 || k < 0) {
        return blas_refuse("gemm: a transpose or size out of range");
    }
    int a_rows = ta == 0 ? m : k, a_cols = ta == 0 ? k : m;
    int b_rows = tb == 0 ? k : n, b_cols = tb == 0 ? n : k;
    if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m)) {
        return blas_refuse("gemm: m " + std::to_string(m) + " n " + std::to_string(n) + " k " +
                           std::to_string(k) + " with lda " + std::to_string(lda) + " ldb " +
                           std::to_string(ldb) + " ldc " + std::to_string(ldc) +
                           ": a leading dimension is below its operand's rows");
    }
    if (m == 0 || n == 0) return BLAS_SUCCESS;
    if ((k > 0 && (!operand(a, extent(a_rows, a_cols, lda), "gemm", "A") ||
                   !operand(b, extent(b_rows, b_cols, ldb), "gemm", "B"))) ||
        !operand(c, extent(m, n, ldc), "gemm", "C")) {
        return BLAS_INVALID_VALUE;
    }
    T al = *alpha, be = *beta;
    enqueue([=] {
        // op(A) as a contiguous column-major m x k, and alpha op(B)'s
        // column j: every inner loop then runs along memory.
        std::vector<T> at;
        const T* a_cols = a;
        long a_ld = lda;
        if (ta != 0) {
            at.resize(size_t(m) * size_t(k));
            for (int p = 0; p < k; ++p)
                for (int i = 0; i < m; ++i) at[size_t(p) * m + i] = a[size_t(i) * lda + p];
            a_cols = at.data();
            a_ld = m;
        }
        std::vector<T> bj(static_cast<size_t>(k));
        for (int j = 0; j < n; ++j) {
            for (int p = 0; p < k; ++p) bj[p] = al * (tb == 0 ? b[size_t(j) * ldb + p] : b[size_t(p) * ldb + j]);
            T* cj = c + size_t(j) * ldc;
            // beta 0 overwrites without reading, as cuBLAS: C may hold NaNs.
            for (int i = 0; i < m; ++i) cj[i] = be == T(0) ? T(0) : be * cj[i];
            for (int p = 0; p < k; ++p) {
                const T* ap = a_cols + size_t(p) * a_ld;
                T s = bj[p];
                for (int i = 0; i < m; ++i) cj[i] += ap[i] * s;
            }
        }
    });
    return BLAS_SUCCESS;
}

template <typename T>
int gemv(void* h, int t, int m, int n, const T* alpha, const T* a, int lda, const T* x, int incx,
         const T* beta, T* y, int incy) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    if (t < 0 || t > 2 || m < 0 || n < 0 || lda < std::max(1, m) || incx != 1 || incy != 1) {
        return blas_refuse("gemv: m " + std::to_string(m) + " n " + std::to_string(n) + " lda " +
                           std::to_string(lda) + ": out of range (or a stride other than 1)");
    }
    int xn = t == 0 ? n : m, yn = t == 0 ? m : n;
    if (m == 0 || n == 0) return BLAS_SUCCESS;
    if (!operand(a, extent(m, n, lda), "gemv", "A") || !operand(x, size_t(xn), "gemv", "x") ||
        !operand(y, size_t(yn), "gemv", "y")) {
        return BLAS_INVALID_VALUE;
    }
    T al = *alpha, be = *beta;
    enqueue([=] {
        for (int i = 0; i < yn; ++i) {
            T s = T(0);
            for (int j = 0; j < xn; ++j) {
                s += (t == 0 ? a[size_t(j) * lda + i] : a[size_t(i) * lda + j]) * x[j];
            }
            y[i] = al * s + (be == T(0) ? T(0) : be * y[i]);
        }
    });
    return BLAS_SUCCESS;
}

template <typename T>
int axpy(void* h, int n, const T* alpha, const T* x, int incx, T* y, int incy) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    if (n < 0 || incx != 1 || incy != 1) return blas_refuse("axpy: n < 0 or a stride other than 1");
    if (n == 0) return BLAS_SUCCESS;
    if (!operand(x, size_t(n), "axpy", "x") || !operand(y, size_t(n), "axpy", "y")) return BLAS_INVALID_VALUE;
    T al = *alpha;
    enqueue([=] {
        for (int i = 0; i < n; ++i) y[i] += al * x[i];
    });
    return BLAS_SUCCESS;
}

template <typename T>
int scal(void* h, int n, const T* alpha, T* x, int incx) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    if (n < 0 || incx != 1) return blas_refuse("scal: n < 0 or a stride other than 1");
    if (n == 0) return BLAS_SUCCESS;
    if (!operand(x, size_t(n), "scal", "x")) return BLAS_INVALID_VALUE;
    T al = *alpha;
    enqueue([=] {
        for (int i = 0; i < n; ++i) x[i] *= al;
    });
    return BLAS_SUCCESS;
}

// dot and asum give their result to a host scalar: cuBLAS returns once
// it is written.
template <typename T>
int dot(void* h, int n, const T* x, int incx, const T* y, int incy, T* result) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    if (n < 0 || incx != 1 || incy != 1) return blas_refuse("dot: n < 0 or a stride other than 1");
    if (n > 0 && (!operand(x, size_t(n), "dot", "x") || !operand(y, size_t(n), "dot", "y"))) {
        return BLAS_INVALID_VALUE;
    }
    flush();
    T s = T(0);
    for (int i = 0; i < n; ++i) s += x[i] * y[i];
    *result = s;
    return BLAS_SUCCESS;
}

template <typename T>
int asum(void* h, int n, const T* x, int incx, T* result) {
    if (h == nullptr) return BLAS_NOT_INITIALIZED;
    if (n < 0 || incx != 1) return blas_refuse("asum: n < 0 or a stride other than 1");
    if (n > 0 && !operand(x, size_t(n), "asum", "x")) return BLAS_INVALID_VALUE;
    flush();
    T s = T(0);
    for (int i = 0; i < n; ++i) s += std::fabs(x[i]);
    *result = s;
    return BLAS_SUCCESS;
}

}  // namespace

extern "C" {

int cublasCreate_v2(void** handle) { *handle = new BlasHandle; return BLAS_SUCCESS; }
int cublasDestroy_v2(void* handle) { flush(); delete static_cast<BlasHandle*>(handle); return BLAS_SUCCESS; }
int cublasSetStream_v2(void*, void*) { return BLAS_SUCCESS; }
int cublasSetPointerMode_v2(void* h, int mode) { static_cast<BlasHandle*>(h)->pointer_mode = mode; return BLAS_SUCCESS; }
int cublasSetMathMode(void*, int) { return BLAS_SUCCESS; }

int cublasSgemm_v2(void* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* a, int lda,
                   const float* b, int ldb, const float* beta, float* c, int ldc) {
    return gemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
int cublasDgemm_v2(void* h, int ta, int tb, int m, int n, int k, const double* alpha, const double* a,
                   int lda, const double* b, int ldb, const double* beta, double* c, int ldc) {
    return gemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
int cublasSgemv_v2(void* h, int t, int m, int n, const float* alpha, const float* a, int lda, const float* x,
                   int incx, const float* beta, float* y, int incy) {
    return gemv(h, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
int cublasDgemv_v2(void* h, int t, int m, int n, const double* alpha, const double* a, int lda,
                   const double* x, int incx, const double* beta, double* y, int incy) {
    return gemv(h, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
int cublasSaxpy_v2(void* h, int n, const float* alpha, const float* x, int incx, float* y, int incy) {
    return axpy(h, n, alpha, x, incx, y, incy);
}
int cublasDaxpy_v2(void* h, int n, const double* alpha, const double* x, int incx, double* y, int incy) {
    return axpy(h, n, alpha, x, incx, y, incy);
}
int cublasSscal_v2(void* h, int n, const float* alpha, float* x, int incx) { return scal(h, n, alpha, x, incx); }
int cublasDscal_v2(void* h, int n, const double* alpha, double* x, int incx) { return scal(h, n, alpha, x, incx); }
int cublasSdot_v2(void* h, int n, const float* x, int incx, const float* y, int incy, float* r) {
    return dot(h, n, x, incx, y, incy, r);
}
int cublasDdot_v2(void* h, int n, const double* x, int incx, const double* y, int incy, double* r) {
    return dot(h, n, x, incx, y, incy, r);
}
int cublasSasum_v2(void* h, int n, const float* x, int incx, float* r) { return asum(h, n, x, incx, r); }
int cublasDasum_v2(void* h, int n, const double* x, int incx, double* r) { return asum(h, n, x, incx, r); }

}  // extern "C"

// ---------------------------------------------------------------- cuRAND
//
// A 64-bit generator drawn at the call and copied in stream order; the
// statistics are cuRAND's (uniform on (0, 1], normal by Box-Muller, in
// pairs), not its streams.

namespace {

enum : int { RAND_SUCCESS = 0, RAND_NOT_INITIALIZED = 101, RAND_LENGTH_NOT_MULTIPLE = 105 };

struct Generator {
    uint64_t state = 0;
    uint64_t next() {  // splitmix64
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return double((next() >> 11) + 1) * 0x1.0p-53; }  // (0, 1]
};

template <typename T>
int draw(void* g, T* out, size_t n, const char* op, const std::function<T(Generator&)>& one) {
    if (g == nullptr) return RAND_NOT_INITIALIZED;
    if (n == 0) return RAND_SUCCESS;
    if (!device_range(DevPtr(uintptr_t(out)), n * sizeof(T), op, "the output")) return RAND_NOT_INITIALIZED;
    std::vector<T> values(n);
    for (T& v : values) v = one(*static_cast<Generator*>(g));
    enqueue([out, values] { std::memcpy(out, values.data(), values.size() * sizeof(T)); });
    return RAND_SUCCESS;
}

template <typename T>
int normal(void* g, T* out, size_t n, T mean, T stddev, const char* op) {
    if (n % 2 != 0) return RAND_LENGTH_NOT_MULTIPLE;
    bool second = false;
    double spare = 0.0;
    return draw<T>(g, out, n, op, [&](Generator& r) {
        if (second) {
            second = false;
            return T(mean + stddev * spare);
        }
        double radius = std::sqrt(-2.0 * std::log(r.uniform())), angle = 6.283185307179586 * r.uniform();
        spare = radius * std::sin(angle);
        second = true;
        return T(mean + stddev * radius * std::cos(angle));
    });
}

}  // namespace

extern "C" {

int curandCreateGenerator(void** g, int) { *g = new Generator; return RAND_SUCCESS; }
int curandDestroyGenerator(void* g) { flush(); delete static_cast<Generator*>(g); return RAND_SUCCESS; }
int curandSetStream(void*, void*) { return RAND_SUCCESS; }
int curandSetPseudoRandomGeneratorSeed(void* g, unsigned long long seed) {
    static_cast<Generator*>(g)->state = seed;
    return RAND_SUCCESS;
}
int curandSetGeneratorOffset(void*, unsigned long long) { return RAND_SUCCESS; }
int curandGenerate(void* g, unsigned* out, size_t n) {
    return draw<unsigned>(g, out, n, "curandGenerate", [](Generator& r) { return unsigned(r.next() >> 32); });
}
int curandGenerateUniform(void* g, float* out, size_t n) {
    return draw<float>(g, out, n, "curandGenerateUniform", [](Generator& r) {
        return float((r.next() >> 40) + 1) * 0x1.0p-24f;  // (0, 1]
    });
}
int curandGenerateUniformDouble(void* g, double* out, size_t n) {
    return draw<double>(g, out, n, "curandGenerateUniformDouble", [](Generator& r) { return r.uniform(); });
}
int curandGenerateNormal(void* g, float* out, size_t n, float mean, float stddev) {
    return normal(g, out, n, mean, stddev, "curandGenerateNormal");
}
int curandGenerateNormalDouble(void* g, double* out, size_t n, double mean, double stddev) {
    return normal(g, out, n, mean, stddev, "curandGenerateNormalDouble");
}

}  // extern "C"

// ---------------------------------------------------------------- cuDNN
//
// 2-D NCHW f32 convolutions computed directly. Where cuDNN would differ
// from run to run or from f32, so does this, so that the layers' choices
// are tested: the heuristics offer what a GPU's do (a non-deterministic
// backward first, a forward FMA math does not support), the
// non-deterministic algorithms sum in a new order each call, and TF32 math
// rounds the operands to a 10-bit mantissa.

namespace {

enum : int { DNN_SUCCESS = 0, DNN_BAD_PARAM = 2000, DNN_NOT_SUPPORTED = 3000 };
enum : int { DNN_DEFAULT_MATH = 0, DNN_FMA_MATH = 3 };

int dnn_refuse(const std::string& why) {
    std::fprintf(stderr, "cpu cuDNN: %s\n", why.c_str());
    return DNN_BAD_PARAM;
}

struct DnnHandle {};
struct Tensor4d {
    bool set = false;
    int n = 0, c = 0, h = 0, w = 0;
};
struct ConvDesc {
    bool set = false;
    int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
    int math = DNN_DEFAULT_MATH;
};

// cudnnConvolution*AlgoPerf_t: the same layout for the three directions.
struct AlgoPerf {
    int algo;
    int status;
    float time;
    size_t memory;
    int determinism;
    int math_type;
    int reserved[3];
};

// The workspace each algorithm asks for here: some take one, so that the
// layers' workspace is exercised.
size_t workspace_of(int direction, int algo, const Tensor4d& x) {
    bool takes = (direction == 0 && algo == 1) || (direction == 1 && algo == 1);
    return takes ? size_t(x.c) * 64 + 256 : 0;
}

// The shapes agree: filter channels are the input's, the output is what
// the padding, stride and dilation give, and everything is set.
bool consistent(const Tensor4d& x, const Tensor4d& w, const ConvDesc& cd, const Tensor4d& y,
                const char* op) {
    if (!x.set || !w.set || !cd.set || !y.set) {
        dnn_refuse(std::string(op) + ": a descriptor was never set");
        return false;
    }
    int oh = (x.h + 2 * cd.pad_h - (cd.dil_h * (w.h - 1) + 1)) / cd.stride_h + 1;
    int ow = (x.w + 2 * cd.pad_w - (cd.dil_w * (w.w - 1) + 1)) / cd.stride_w + 1;
    if (w.c != x.c || y.n != x.n || y.c != w.n || y.h != oh || y.w != ow) {
        dnn_refuse(std::string(op) + ": input " + std::to_string(x.n) + "x" + std::to_string(x.c) + "x" +
                   std::to_string(x.h) + "x" + std::to_string(x.w) + ", filter " + std::to_string(w.n) +
                   "x" + std::to_string(w.c) + "x" + std::to_string(w.h) + "x" + std::to_string(w.w) +
                   " and output " + std::to_string(y.n) + "x" + std::to_string(y.c) + "x" +
                   std::to_string(y.h) + "x" + std::to_string(y.w) + " do not fit the convolution");
        return false;
    }
    return true;
}

size_t count(const Tensor4d& t) { return size_t(t.n) * t.c * t.h * t.w; }

bool workspace_ok(const void* ws, size_t given, size_t needed, const char* op) {
    if (given < needed) {
        dnn_refuse(std::string(op) + ": a workspace of " + std::to_string(given) + " bytes, the algorithm needs " +
                   std::to_string(needed));
        return false;
    }
    return needed == 0 || device_range(DevPtr(uintptr_t(ws)), needed, op, "the workspace");
}

// f32 rounded to TF32's 10-bit mantissa (nearest, ties away).
float tf32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits = (bits + 0x1000u) & 0xffffe000u;
    std::memcpy(&v, &bits, 4);
    return v;
}

// The columns of image `n` (Caffe's im2col): row q = (c, r, s) of the
// filter, column p an output pixel; zero where the window leaves the
// input. TF32 math rounds them.
void columns(const float* x, const Tensor4d& xt, const Tensor4d& wt, const ConvDesc& cd, const Tensor4d& yt,
             size_t n, bool round, std::vector<float>& col) {
    size_t plane = size_t(yt.h) * yt.w;
    col.assign(size_t(wt.c) * wt.h * wt.w * plane, 0.0f);
    for (int c = 0; c < wt.c; ++c)
        for (int r = 0; r < wt.h; ++r)
            for (int s = 0; s < wt.w; ++s) {
                float* row = &col[((size_t(c) * wt.h + r) * wt.w + s) * plane];
                for (int oy = 0; oy < yt.h; ++oy) {
                    int iy = oy * cd.stride_h - cd.pad_h + r * cd.dil_h;
                    if (iy < 0 || iy >= xt.h) continue;
                    const float* in = x + ((n * xt.c + c) * xt.h + iy) * xt.w;
                    for (int ox = 0; ox < yt.w; ++ox) {
                        int ix = ox * cd.stride_w - cd.pad_w + s * cd.dil_w;
                        if (ix >= 0 && ix < xt.w) row[size_t(oy) * yt.w + ox] = round ? tf32(in[ix]) : in[ix];
                    }
                }
            }
}

// Adds columns back into image `n`'s gradient (Caffe's col2im).
void add_columns(const std::vector<float>& col, const Tensor4d& xt, const Tensor4d& wt, const ConvDesc& cd,
                 const Tensor4d& yt, size_t n, float* dx) {
    size_t plane = size_t(yt.h) * yt.w;
    for (int c = 0; c < wt.c; ++c)
        for (int r = 0; r < wt.h; ++r)
            for (int s = 0; s < wt.w; ++s) {
                const float* row = &col[((size_t(c) * wt.h + r) * wt.w + s) * plane];
                for (int oy = 0; oy < yt.h; ++oy) {
                    int iy = oy * cd.stride_h - cd.pad_h + r * cd.dil_h;
                    if (iy < 0 || iy >= xt.h) continue;
                    float* out = dx + ((n * xt.c + c) * xt.h + iy) * xt.w;
                    for (int ox = 0; ox < yt.w; ++ox) {
                        int ix = ox * cd.stride_w - cd.pad_w + s * cd.dil_w;
                        if (ix >= 0 && ix < xt.w) out[ix] += row[size_t(oy) * yt.w + ox];
                    }
                }
            }
}

// Sum of a[i] * b[i] in eight fixed lanes: the same order on every call.
float dot8(const float* a, const float* b, size_t n) {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) lane[l] += a[i + l] * b[i + l];
    float s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

// 0, 1, ..., n - 1, or shuffled: a non-deterministic algorithm's atomics
// add in another order on every run.
std::vector<size_t> order_of(size_t n, bool shuffled) {
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    if (shuffled) {
        static uint64_t state = 0x2545f4914f6cdd1dull;
        for (size_t i = n; i > 1; --i) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            std::swap(order[i - 1], order[state % i]);
        }
    }
    return order;
}

}  // namespace

extern "C" {

size_t cudnnGetVersion() { return 92100; }
int cudnnCreate(void** h) {
    if (no_context("cudnnCreate")) return DNN_BAD_PARAM;
    *h = new DnnHandle;
    return DNN_SUCCESS;
}
int cudnnDestroy(void* h) { flush(); delete static_cast<DnnHandle*>(h); return DNN_SUCCESS; }
int cudnnSetStream(void*, void*) { return DNN_SUCCESS; }

int cudnnCreateTensorDescriptor(void** d) { *d = new Tensor4d; return DNN_SUCCESS; }
int cudnnDestroyTensorDescriptor(void* d) { delete static_cast<Tensor4d*>(d); return DNN_SUCCESS; }
int cudnnSetTensor4dDescriptor(void* d, int format, int type, int n, int c, int h, int w) {
    if (format != 0 || type != 0) return dnn_refuse("tensor: only NCHW f32 is emulated");
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return dnn_refuse("tensor: a dimension is not positive");
    *static_cast<Tensor4d*>(d) = Tensor4d{true, n, c, h, w};
    return DNN_SUCCESS;
}
int cudnnCreateFilterDescriptor(void** d) { *d = new Tensor4d; return DNN_SUCCESS; }
int cudnnDestroyFilterDescriptor(void* d) { delete static_cast<Tensor4d*>(d); return DNN_SUCCESS; }
int cudnnSetFilter4dDescriptor(void* d, int type, int format, int k, int c, int h, int w) {
    if (format != 0 || type != 0) return dnn_refuse("filter: only NCHW f32 is emulated");
    if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return dnn_refuse("filter: a dimension is not positive");
    *static_cast<Tensor4d*>(d) = Tensor4d{true, k, c, h, w};
    return DNN_SUCCESS;
}
int cudnnCreateConvolutionDescriptor(void** d) { *d = new ConvDesc; return DNN_SUCCESS; }
int cudnnDestroyConvolutionDescriptor(void* d) { delete static_cast<ConvDesc*>(d); return DNN_SUCCESS; }
int cudnnSetConvolution2dDescriptor(void* d, int pad_h, int pad_w, int u, int v, int dil_h, int dil_w, int mode,
                                    int compute) {
    if (mode != 1) return dnn_refuse("convolution: only cross-correlation (Caffe's) is emulated");
    if (compute != 0) return dnn_refuse("convolution: only f32 compute is emulated");
    if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dil_h <= 0 || dil_w <= 0) {
        return dnn_refuse("convolution: a negative pad or a stride or dilation below 1");
    }
    auto* cd = static_cast<ConvDesc*>(d);
    int math = cd->math;
    *cd = ConvDesc{true, pad_h, pad_w, u, v, dil_h, dil_w, math};
    return DNN_SUCCESS;
}
int cudnnSetConvolutionMathType(void* d, int math) {
    if (math != DNN_DEFAULT_MATH && math != 1 && math != 2 && math != DNN_FMA_MATH) {
        return dnn_refuse("convolution: unknown math type");
    }
    static_cast<ConvDesc*>(d)->math = math;
    return DNN_SUCCESS;
}

// Heuristics. Forward: under FMA math the first offer is Winograd, which
// FMA math does not support (its workspace query says so), as a GPU's
// heuristics may list algorithms of every math type; otherwise the
// precomputed implicit gemm, with a workspace. Backward: the
// non-deterministic ALGO_0 first, as a GPU's often is.
int cudnnGetConvolutionForwardAlgorithm_v7(void* h, void* x, void* w, void* c, void* y, int requested, int* returned,
                                           AlgoPerf* perf) {
    if (h == nullptr || requested < 1) return DNN_BAD_PARAM;
    auto& cd = *static_cast<ConvDesc*>(c);
    if (!consistent(*static_cast<Tensor4d*>(x), *static_cast<Tensor4d*>(w), cd, *static_cast<Tensor4d*>(y),
                    "cudnnGetConvolutionForwardAlgorithm_v7")) {
        return DNN_BAD_PARAM;
    }
    perf[0] = AlgoPerf{cd.math == DNN_FMA_MATH ? 7 : 1, DNN_SUCCESS, 0.0f, 0, 1, cd.math, {0, 0, 0}};
    *returned = 1;
    return DNN_SUCCESS;
}
int cudnnGetConvolutionBackwardFilterAlgorithm_v7(void* h, void* x, void* dy, void* c, void* dw, int requested,
                                                  int* returned, AlgoPerf* perf) {
    if (h == nullptr || requested < 1) return DNN_BAD_PARAM;
    if (!consistent(*static_cast<Tensor4d*>(x), *static_cast<Tensor4d*>(dw), *static_cast<ConvDesc*>(c),
                    *static_cast<Tensor4d*>(dy), "cudnnGetConvolutionBackwardFilterAlgorithm_v7")) {
        return DNN_BAD_PARAM;
    }
    perf[0] = AlgoPerf{0, DNN_SUCCESS, 0.0f, 0, 0, static_cast<ConvDesc*>(c)->math, {0, 0, 0}};
    *returned = 1;
    return DNN_SUCCESS;
}
int cudnnGetConvolutionBackwardDataAlgorithm_v7(void* h, void* w, void* dy, void* c, void* dx, int requested,
                                                int* returned, AlgoPerf* perf) {
    if (h == nullptr || requested < 1) return DNN_BAD_PARAM;
    if (!consistent(*static_cast<Tensor4d*>(dx), *static_cast<Tensor4d*>(w), *static_cast<ConvDesc*>(c),
                    *static_cast<Tensor4d*>(dy), "cudnnGetConvolutionBackwardDataAlgorithm_v7")) {
        return DNN_BAD_PARAM;
    }
    perf[0] = AlgoPerf{0, DNN_SUCCESS, 0.0f, 0, 0, static_cast<ConvDesc*>(c)->math, {0, 0, 0}};
    *returned = 1;
    return DNN_SUCCESS;
}

int cudnnGetConvolutionForwardWorkspaceSize(void*, void* x, void*, void* c, void*, int algo, size_t* bytes) {
    if (algo < 0 || algo > 7) return DNN_BAD_PARAM;
    if (algo == 7 && static_cast<ConvDesc*>(c)->math == DNN_FMA_MATH) return DNN_NOT_SUPPORTED;
    *bytes = workspace_of(0, algo, *static_cast<Tensor4d*>(x));
    return DNN_SUCCESS;
}
int cudnnGetConvolutionBackwardFilterWorkspaceSize(void*, void* x, void*, void*, void*, int algo, size_t* bytes) {
    if (algo < 0 || algo > 6) return DNN_BAD_PARAM;
    *bytes = workspace_of(1, algo, *static_cast<Tensor4d*>(x));
    return DNN_SUCCESS;
}
int cudnnGetConvolutionBackwardDataWorkspaceSize(void*, void*, void*, void*, void* dx, int algo, size_t* bytes) {
    if (algo < 0 || algo > 5) return DNN_BAD_PARAM;
    *bytes = workspace_of(2, algo, *static_cast<Tensor4d*>(dx));
    return DNN_SUCCESS;
}

int cudnnConvolutionForward(void* h, const float* alpha, void* xd, const float* x, void* wd, const float* w,
                            void* cdesc, int algo, void* ws, size_t ws_bytes, const float* beta, void* yd, float* y) {
    const char* op = "cudnnConvolutionForward";
    if (h == nullptr) return DNN_BAD_PARAM;
    Tensor4d xt = *static_cast<Tensor4d*>(xd), wt = *static_cast<Tensor4d*>(wd), yt = *static_cast<Tensor4d*>(yd);
    ConvDesc cd = *static_cast<ConvDesc*>(cdesc);
    if (!consistent(xt, wt, cd, yt, op)) return DNN_BAD_PARAM;
    if (algo == 7 && cd.math == DNN_FMA_MATH) return DNN_NOT_SUPPORTED;
    if (!workspace_ok(ws, ws_bytes, workspace_of(0, algo, xt), op) ||
        !device_range(DevPtr(uintptr_t(x)), count(xt) * 4, op, "x") ||
        !device_range(DevPtr(uintptr_t(w)), count(wt) * 4, op, "w") ||
        !device_range(DevPtr(uintptr_t(y)), count(yt) * 4, op, "y")) {
        return DNN_BAD_PARAM;
    }
    float al = *alpha, be = *beta;
    bool round = cd.math == DNN_DEFAULT_MATH;
    enqueue([=] {
        size_t plane = size_t(yt.h) * yt.w, taps = size_t(wt.c) * wt.h * wt.w;
        std::vector<float> col, sum(plane), wr(count(wt));
        for (size_t i = 0; i < wr.size(); ++i) wr[i] = round ? tf32(w[i]) : w[i];
        for (size_t n = 0; n < size_t(xt.n); ++n) {
            columns(x, xt, wt, cd, yt, n, round, col);
            for (size_t k = 0; k < size_t(wt.n); ++k) {
                std::fill(sum.begin(), sum.end(), 0.0f);
                for (size_t q = 0; q < taps; ++q) {
                    float wq = wr[k * taps + q];
                    const float* row = &col[q * plane];
                    for (size_t p = 0; p < plane; ++p) sum[p] += wq * row[p];
                }
                float* out = y + (n * wt.n + k) * plane;
                for (size_t p = 0; p < plane; ++p) out[p] = al * sum[p] + (be == 0.0f ? 0.0f : be * out[p]);
            }
        }
    });
    return DNN_SUCCESS;
}

int cudnnConvolutionBackwardFilter(void* h, const float* alpha, void* xd, const float* x, void* dyd, const float* dy,
                                   void* cdesc, int algo, void* ws, size_t ws_bytes, const float* beta, void* dwd,
                                   float* dw) {
    const char* op = "cudnnConvolutionBackwardFilter";
    if (h == nullptr) return DNN_BAD_PARAM;
    Tensor4d xt = *static_cast<Tensor4d*>(xd), wt = *static_cast<Tensor4d*>(dwd), yt = *static_cast<Tensor4d*>(dyd);
    ConvDesc cd = *static_cast<ConvDesc*>(cdesc);
    if (!consistent(xt, wt, cd, yt, op)) return DNN_BAD_PARAM;
    if (!workspace_ok(ws, ws_bytes, workspace_of(1, algo, xt), op) ||
        !device_range(DevPtr(uintptr_t(x)), count(xt) * 4, op, "x") ||
        !device_range(DevPtr(uintptr_t(dy)), count(yt) * 4, op, "dy") ||
        !device_range(DevPtr(uintptr_t(dw)), count(wt) * 4, op, "dw")) {
        return DNN_BAD_PARAM;
    }
    float al = *alpha, be = *beta;
    bool round = cd.math == DNN_DEFAULT_MATH, shuffled = algo == 0 || algo == 3;
    enqueue([=] {
        size_t plane = size_t(yt.h) * yt.w, taps = size_t(wt.c) * wt.h * wt.w;
        std::vector<float> col, sum(count(wt), 0.0f), g(plane);
        // The images in order, or in a new one each call (ALGO_0, ALGO_3).
        for (size_t n : order_of(size_t(xt.n), shuffled)) {
            columns(x, xt, wt, cd, yt, n, round, col);
            for (size_t k = 0; k < size_t(wt.n); ++k) {
                const float* dyk = dy + (n * wt.n + k) * plane;
                for (size_t p = 0; p < plane; ++p) g[p] = round ? tf32(dyk[p]) : dyk[p];
                for (size_t q = 0; q < taps; ++q) sum[k * taps + q] += dot8(g.data(), &col[q * plane], plane);
            }
        }
        for (size_t i = 0; i < sum.size(); ++i) dw[i] = al * sum[i] + (be == 0.0f ? 0.0f : be * dw[i]);
    });
    return DNN_SUCCESS;
}

int cudnnConvolutionBackwardData(void* h, const float* alpha, void* wd, const float* w, void* dyd, const float* dy,
                                 void* cdesc, int algo, void* ws, size_t ws_bytes, const float* beta, void* dxd,
                                 float* dx) {
    const char* op = "cudnnConvolutionBackwardData";
    if (h == nullptr) return DNN_BAD_PARAM;
    Tensor4d xt = *static_cast<Tensor4d*>(dxd), wt = *static_cast<Tensor4d*>(wd), yt = *static_cast<Tensor4d*>(dyd);
    ConvDesc cd = *static_cast<ConvDesc*>(cdesc);
    if (!consistent(xt, wt, cd, yt, op)) return DNN_BAD_PARAM;
    if (!workspace_ok(ws, ws_bytes, workspace_of(2, algo, xt), op) ||
        !device_range(DevPtr(uintptr_t(w)), count(wt) * 4, op, "w") ||
        !device_range(DevPtr(uintptr_t(dy)), count(yt) * 4, op, "dy") ||
        !device_range(DevPtr(uintptr_t(dx)), count(xt) * 4, op, "dx")) {
        return DNN_BAD_PARAM;
    }
    float al = *alpha, be = *beta;
    bool round = cd.math == DNN_DEFAULT_MATH, shuffled = algo == 0;
    enqueue([=] {
        size_t plane = size_t(yt.h) * yt.w, taps = size_t(wt.c) * wt.h * wt.w;
        std::vector<float> col(taps * plane), sum(count(xt), 0.0f), wr(count(wt)), g(plane);
        for (size_t i = 0; i < wr.size(); ++i) wr[i] = round ? tf32(w[i]) : w[i];
        for (size_t n = 0; n < size_t(xt.n); ++n) {
            std::fill(col.begin(), col.end(), 0.0f);
            // The output channels in order, or in a new one each call (ALGO_0).
            for (size_t k : order_of(size_t(wt.n), shuffled)) {
                const float* dyk = dy + (n * wt.n + k) * plane;
                for (size_t p = 0; p < plane; ++p) g[p] = round ? tf32(dyk[p]) : dyk[p];
                for (size_t q = 0; q < taps; ++q) {
                    float wq = wr[k * taps + q];
                    float* row = &col[q * plane];
                    for (size_t p = 0; p < plane; ++p) row[p] += wq * g[p];
                }
            }
            add_columns(col, xt, wt, cd, yt, n, sum.data());
        }
        for (size_t i = 0; i < sum.size(); ++i) dx[i] = al * sum[i] + (be == 0.0f ? 0.0f : be * dx[i]);
    });
    return DNN_SUCCESS;
}

}  // extern "C"
