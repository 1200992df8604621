// cuDNN's convolutions on the CPU, for the CPU CUDA driver (see
// driver.cpp).
//
// 2-D NCHW f32 convolutions computed directly. Where cuDNN would differ
// from run to run or from f32, so does this, so that the layers' choices
// are tested: the heuristics offer what a GPU's do (a non-deterministic
// backward first, a forward FMA math does not support), the
// non-deterministic algorithms sum in a new order each call, and TF32 math
// rounds the operands to a 10-bit mantissa.

#include "stream.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace cpu_cuda;

namespace {

enum : int { DNN_SUCCESS = 0, DNN_BAD_PARAM = 2000, DNN_NOT_SUPPORTED = 3000 };
enum : int { DNN_DEFAULT_MATH = 0, DNN_FMA_MATH = 3 };

int dnn_refuse(const std::string& why) {
    std::fprintf(stderr, "cpu cuDNN: %s\n", why.c_str());
    return DNN_BAD_PARAM;
}

struct DnnHandle {
    void* stream = nullptr;  // cudnnSetStream's
};
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

// One convolution call's descriptors, read once it is checked.
struct Call {
    Tensor4d x, w, y;
    ConvDesc cd;
};

// Checks a call in `direction` (0 forward, 1 backward filter, 2 backward
// data) as cuDNN would: the descriptors agree, the workspace holds what
// the algorithm needs, and x (the input or its gradient), w (the filter
// or its gradient) and y (the output or its gradient) lie in device
// memory with the extents their descriptors give. Returns the status.
int checked(const char* op, void* h, void* xd, void* wd, void* yd, void* cdesc, int direction, int algo,
            const void* ws, size_t ws_bytes, const void* x, const void* w, const void* y, Call& call) {
    if (h == nullptr) return DNN_BAD_PARAM;
    cpu_cuda::count(Counter::DnnCompute);
    call = Call{*static_cast<Tensor4d*>(xd), *static_cast<Tensor4d*>(wd), *static_cast<Tensor4d*>(yd),
                *static_cast<ConvDesc*>(cdesc)};
    if (!consistent(call.x, call.w, call.cd, call.y, op)) return DNN_BAD_PARAM;
    if (direction == 0 && algo == 7 && call.cd.math == DNN_FMA_MATH) return DNN_NOT_SUPPORTED;
    bool ok = workspace_ok(ws, ws_bytes, workspace_of(direction, algo, call.x), op) &&
              device_range(DevPtr(uintptr_t(x)), count(call.x) * 4, op, direction == 2 ? "dx" : "x") &&
              device_range(DevPtr(uintptr_t(w)), count(call.w) * 4, op, direction == 1 ? "dw" : "w") &&
              device_range(DevPtr(uintptr_t(y)), count(call.y) * 4, op, direction == 0 ? "y" : "dy");
    return ok ? DNN_SUCCESS : DNN_BAD_PARAM;
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

// cuDNN 9.21.0, unless BLOBFLOW_CPU_CUDNN_VERSION gives another number
// (as cudnnGetVersion returns it), to show a library the build refuses.
size_t cudnnGetVersion() {
    const char* version = std::getenv("BLOBFLOW_CPU_CUDNN_VERSION");
    return version != nullptr ? std::strtoull(version, nullptr, 10) : 92100;
}
int cudnnCreate(void** h) {
    if (no_context("cudnnCreate")) return DNN_BAD_PARAM;
    *h = new DnnHandle;
    return DNN_SUCCESS;
}
int cudnnDestroy(void* h) {
    flush(static_cast<DnnHandle*>(h)->stream);
    delete static_cast<DnnHandle*>(h);
    return DNN_SUCCESS;
}
int cudnnSetStream(void* h, void* stream) {
    static_cast<DnnHandle*>(h)->stream = stream;
    return DNN_SUCCESS;
}

int cudnnCreateTensorDescriptor(void** d) { *d = new Tensor4d; return DNN_SUCCESS; }
int cudnnDestroyTensorDescriptor(void* d) { delete static_cast<Tensor4d*>(d); return DNN_SUCCESS; }
int cudnnSetTensor4dDescriptor(void* d, int format, int type, int n, int c, int h, int w) {
    cpu_cuda::count(Counter::DnnSetup);
    if (format != 0 || type != 0) return dnn_refuse("tensor: only NCHW f32 is emulated");
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return dnn_refuse("tensor: a dimension is not positive");
    *static_cast<Tensor4d*>(d) = Tensor4d{true, n, c, h, w};
    return DNN_SUCCESS;
}
int cudnnCreateFilterDescriptor(void** d) { *d = new Tensor4d; return DNN_SUCCESS; }
int cudnnDestroyFilterDescriptor(void* d) { delete static_cast<Tensor4d*>(d); return DNN_SUCCESS; }
int cudnnSetFilter4dDescriptor(void* d, int type, int format, int k, int c, int h, int w) {
    cpu_cuda::count(Counter::DnnSetup);
    if (format != 0 || type != 0) return dnn_refuse("filter: only NCHW f32 is emulated");
    if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return dnn_refuse("filter: a dimension is not positive");
    *static_cast<Tensor4d*>(d) = Tensor4d{true, k, c, h, w};
    return DNN_SUCCESS;
}
int cudnnCreateConvolutionDescriptor(void** d) { *d = new ConvDesc; return DNN_SUCCESS; }
int cudnnDestroyConvolutionDescriptor(void* d) { delete static_cast<ConvDesc*>(d); return DNN_SUCCESS; }
int cudnnSetConvolution2dDescriptor(void* d, int pad_h, int pad_w, int u, int v, int dil_h, int dil_w, int mode,
                                    int compute) {
    cpu_cuda::count(Counter::DnnSetup);
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
    cpu_cuda::count(Counter::DnnSetup);
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
    cpu_cuda::count(Counter::DnnSetup);
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
    cpu_cuda::count(Counter::DnnSetup);
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
    cpu_cuda::count(Counter::DnnSetup);
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
    cpu_cuda::count(Counter::DnnSetup);
    if (algo < 0 || algo > 7) return DNN_BAD_PARAM;
    if (algo == 7 && static_cast<ConvDesc*>(c)->math == DNN_FMA_MATH) return DNN_NOT_SUPPORTED;
    *bytes = workspace_of(0, algo, *static_cast<Tensor4d*>(x));
    return DNN_SUCCESS;
}
int cudnnGetConvolutionBackwardFilterWorkspaceSize(void*, void* x, void*, void*, void*, int algo, size_t* bytes) {
    cpu_cuda::count(Counter::DnnSetup);
    if (algo < 0 || algo > 6) return DNN_BAD_PARAM;
    *bytes = workspace_of(1, algo, *static_cast<Tensor4d*>(x));
    return DNN_SUCCESS;
}
int cudnnGetConvolutionBackwardDataWorkspaceSize(void*, void*, void*, void*, void* dx, int algo, size_t* bytes) {
    cpu_cuda::count(Counter::DnnSetup);
    if (algo < 0 || algo > 5) return DNN_BAD_PARAM;
    *bytes = workspace_of(2, algo, *static_cast<Tensor4d*>(dx));
    return DNN_SUCCESS;
}

int cudnnConvolutionForward(void* h, const float* alpha, void* xd, const float* x, void* wd, const float* w,
                            void* cdesc, int algo, void* ws, size_t ws_bytes, const float* beta, void* yd, float* y) {
    Call c;
    int status = checked("cudnnConvolutionForward", h, xd, wd, yd, cdesc, 0, algo, ws, ws_bytes, x, w, y, c);
    if (status != DNN_SUCCESS) return status;
    Tensor4d xt = c.x, wt = c.w, yt = c.y;
    ConvDesc cd = c.cd;
    float al = *alpha, be = *beta;
    bool round = cd.math == DNN_DEFAULT_MATH;
    enqueue(static_cast<DnnHandle*>(h)->stream, [=] {
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
    Call c;
    int status =
        checked("cudnnConvolutionBackwardFilter", h, xd, dwd, dyd, cdesc, 1, algo, ws, ws_bytes, x, dw, dy, c);
    if (status != DNN_SUCCESS) return status;
    Tensor4d xt = c.x, wt = c.w, yt = c.y;
    ConvDesc cd = c.cd;
    float al = *alpha, be = *beta;
    bool round = cd.math == DNN_DEFAULT_MATH, shuffled = algo == 0 || algo == 3;
    enqueue(static_cast<DnnHandle*>(h)->stream, [=] {
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
    Call c;
    int status =
        checked("cudnnConvolutionBackwardData", h, dxd, wd, dyd, cdesc, 2, algo, ws, ws_bytes, dx, w, dy, c);
    if (status != DNN_SUCCESS) return status;
    Tensor4d xt = c.x, wt = c.w, yt = c.y;
    ConvDesc cd = c.cd;
    float al = *alpha, be = *beta;
    bool round = cd.math == DNN_DEFAULT_MATH, shuffled = algo == 0;
    enqueue(static_cast<DnnHandle*>(h)->stream, [=] {
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
