// The kernels of matmul_kernel_template.h on 16-wide AVX-512 vectors. The
// intrinsics are AVX-512F ones; the table is picked only on CPUs that have
// every instruction set this file is compiled for (see simd_level.cpp).
// GCC 12's AVX-512 intrinsics start from deliberately undefined registers and
// warn about them wherever they are inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/matmul_kernel_template.h"

namespace duet::cpu::detail {

namespace {

struct Avx512Ops {
    using Vec = __m512;
    static constexpr int64_t kWidth = 16;

    static Vec zero() { return _mm512_setzero_ps(); }
    static Vec broadcast(float a) { return _mm512_set1_ps(a); }
    static Vec load(const float* p) { return _mm512_loadu_ps(p); }
    // bf16 -> f32: zero-extend each 16-bit value to 32 bits and shift it into the top half.
    static Vec load(const uint16_t* p) {
        const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        const __m512i wide = _mm512_cvtepu16_epi32(bits);
        return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    }
    static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
    static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
    static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }

    // Lanes i and i+8 first, then the same tree as the 8-wide AVX2 sum.
    static float sum(Vec v) {
        const __m256 low = _mm512_castps512_ps256(v);
        const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
        const __m256 v8 = _mm256_add_ps(low, high);
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
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

extern const MatmulKernels kAvx512Kernels = make_kernels<Avx512Ops>();

}  // namespace duet::cpu::detail
