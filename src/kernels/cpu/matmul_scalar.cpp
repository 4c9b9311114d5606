// The kernels of matmul_kernel_template.h for CPUs without AVX2, in portable
// code. A "vector" is 8 separate lanes, so the order of additions matches the
// other levels' layout, but a multiply and an add round separately: without
// hardware fma, std::fma would be a slow library call.
#include <cstdint>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/matmul_kernel_template.h"

namespace duet::cpu::detail {

namespace {

struct ScalarOps {
    static constexpr int64_t kWidth = 8;
    struct Vec {
        float lane[kWidth];
    };

    static Vec zero() { return Vec{}; }
    static Vec broadcast(float a) {
        Vec v;
        for (int64_t i = 0; i < kWidth; ++i) v.lane[i] = a;
        return v;
    }
    static Vec load(const float* p) {
        Vec v;
        for (int64_t i = 0; i < kWidth; ++i) v.lane[i] = p[i];
        return v;
    }
    static Vec load(const uint16_t* p) {
        Vec v;
        for (int64_t i = 0; i < kWidth; ++i) v.lane[i] = widen(p[i]);
        return v;
    }
    static void store(float* p, Vec v) {
        for (int64_t i = 0; i < kWidth; ++i) p[i] = v.lane[i];
    }
    static Vec add(Vec a, Vec b) {
        for (int64_t i = 0; i < kWidth; ++i) a.lane[i] += b.lane[i];
        return a;
    }
    static Vec fma(Vec a, Vec b, Vec c) {
        for (int64_t i = 0; i < kWidth; ++i) c.lane[i] += a.lane[i] * b.lane[i];
        return c;
    }
    // The same tree as the AVX2 sum.
    static float sum(Vec v) {
        const float* l = v.lane;
        return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    }

    static float fma(float a, float b, float c) { return c + a * b; }
    static float widen(float v) { return v; }
    static float widen(uint16_t bits) {
        const uint32_t wide = static_cast<uint32_t>(bits) << 16;
        float v;
        __builtin_memcpy(&v, &wide, sizeof v);
        return v;
    }
};

}  // namespace

extern const MatmulKernels kScalarKernels = make_kernels<ScalarOps>();

}  // namespace duet::cpu::detail
