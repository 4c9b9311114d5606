// Kernel tests: random inputs and plain double-precision activations for references (how far a
// float kernel may stray from one: relative_error, test_support.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "test_support.h"

namespace duet::testing {

// Uniform in [lo, hi] and never exactly zero, so no term of a sum silently vanishes.
inline std::vector<float> random_values(std::mt19937& rng, int64_t count, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> values(static_cast<size_t>(count));
    for (float& v : values) {
        do {
            v = dist(rng);
        } while (v == 0.0f);
    }
    return values;
}

// `rows` rows of `width` random values laid out `stride` apart, the gaps filled with NaN so a kernel
// that reads between rows fails.
inline std::vector<float> random_strided_rows(std::mt19937& rng, int64_t rows, int64_t width, int64_t stride,
                                              float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> values(static_cast<size_t>(rows * stride), std::numeric_limits<float>::quiet_NaN());
    for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> row = random_values(rng, width, lo, hi);
        std::copy(row.begin(), row.end(), values.begin() + r * stride);
    }
    return values;
}

inline ::testing::AssertionResult bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) {
        return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
    }
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            return ::testing::AssertionFailure() << "first difference at " << i << ": " << a[i] << " vs " << b[i];
        }
    }
    return ::testing::AssertionSuccess();
}

inline double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }
// PyTorch's softplus with threshold 20: linear above it.
inline double softplus_ref(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }
inline double relu2_ref(double x) { return x > 0.0 ? x * x : 0.0; }

}  // namespace duet::testing
