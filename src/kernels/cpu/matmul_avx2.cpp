// The kernels of matmul_kernel_template.h on 8-wide AVX2 vectors.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/matmul_kernel_template.h"

namespace duet::cpu::detail {

namespace {

struct Avx2Ops {
    using Vec = __m256;
    static constexpr int64_t kWidth = 8;

    static Vec zero() { return _mm256_setzero_ps(); }
    static Vec broadcast(float a) { return _mm256_set1_ps(a); }
    static Vec load(const float* p) { return _mm256_loadu_ps(p); }
    // bf16 -> f32: zero-extend each 16-bit value to 32 bits and shift it into the top half.
    static Vec load(const uint16_t* p) {
        const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        const __m256i wide = _mm256_cvtepu16_epi32(bits);
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
    static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
    static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
    static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }

    // ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7))
    static float sum(Vec v) {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }

    static float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
    static float widen(float v) { return v; }
    static float widen(uint16_t bits) {
        return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(bits) << 16)));
    }
};

}  // namespace

extern const MatmulKernels kAvx2Kernels = make_kernels<Avx2Ops>();

}  // namespace duet::cpu::detail
