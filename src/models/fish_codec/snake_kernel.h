// The Snake activation's inner loop, included by snake.cpp (baseline x86-64) and snake_avx2.cpp
// (compiled for AVX2 + FMA): straight-line float code the compiler vectorises. Internal linkage, so
// each file keeps its own build of it.
#pragma once

#include <cmath>
#include <cstdint>

namespace duet::fish_codec::snake_detail {

// sin²(x) for |x| < kSinSquaredRange: sin² has period π, so x = kπ + r with |r| ≤ π/2 (π split in three
// parts so that k·π is exact enough), then sin(r) by its Taylor series to r¹³ (error below 1e-9 on
// [-π/2, π/2]).
constexpr float kSinSquaredRange = 1.0e5f;

static inline float sin_squared(float x) {
    const float round_magic = 12582912.0f;  // 1.5 · 2²³: adding and subtracting it rounds to an integer
    const float k = (x * 0.318309886183790671f + round_magic) - round_magic;
    float r = x - k * 3.140625f;
    r = r - k * 9.67502593994140625e-4f;
    r = r - k * 1.509957990978376432e-7f;
    const float r2 = r * r;
    float p = 1.0f / 6227020800.0f;
    p = p * r2 - 1.0f / 39916800.0f;
    p = p * r2 + 1.0f / 362880.0f;
    p = p * r2 - 1.0f / 5040.0f;
    p = p * r2 + 1.0f / 120.0f;
    p = p * r2 - 1.0f / 6.0f;
    const float sin_r = r + r * r2 * p;
    return sin_r * sin_r;
}

// x[t, c] += inv_alpha[c] · sin²(alpha[c] · x[t, c]) for rows [begin, end).
static inline void snake_rows(const float* alpha, const float* inv_alpha, float* x, int64_t channels, int64_t begin,
                              int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
        float* row = x + t * channels;
        int in_range = 1;
        for (int64_t c = 0; c < channels; ++c) in_range &= std::fabs(alpha[c] * row[c]) < kSinSquaredRange;
        if (in_range) {
            for (int64_t c = 0; c < channels; ++c) row[c] += inv_alpha[c] * sin_squared(alpha[c] * row[c]);
        } else {
            // Rare: huge activations, inf or NaN.
            for (int64_t c = 0; c < channels; ++c) {
                const float s = std::sin(alpha[c] * row[c]);
                row[c] += inv_alpha[c] * (s * s);
            }
        }
    }
}

}  // namespace duet::fish_codec::snake_detail
