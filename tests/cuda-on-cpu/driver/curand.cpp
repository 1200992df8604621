// cuRAND on the CPU, for the CPU CUDA driver (see driver.cpp).
//
// A 64-bit generator drawn at the call and copied in stream order; the
// statistics are cuRAND's (uniform on (0, 1], normal by Box-Muller, in
// pairs), not its streams.

#include "stream.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace cpu_cuda;

namespace {

enum : int { RAND_SUCCESS = 0, RAND_NOT_INITIALIZED = 101, RAND_LENGTH_NOT_MULTIPLE = 105 };

struct Generator {
    void* stream = nullptr;  // curandSetStream's
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
    count(Counter::Rand);
    std::vector<T> values(n);
    for (T& v : values) v = one(*static_cast<Generator*>(g));
    enqueue(static_cast<Generator*>(g)->stream, [out, values] { std::memcpy(out, values.data(), values.size() * sizeof(T)); });
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
int curandDestroyGenerator(void* g) {
    flush(static_cast<Generator*>(g)->stream);
    delete static_cast<Generator*>(g);
    return RAND_SUCCESS;
}
int curandSetStream(void* g, void* stream) {
    static_cast<Generator*>(g)->stream = stream;
    return RAND_SUCCESS;
}
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

