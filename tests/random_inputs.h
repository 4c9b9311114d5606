// Random inputs for kernel tests, and how far a float kernel may stray from a double reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

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

// max|actual - expected| / max|expected|; infinite when anything is not finite, since a NaN would
// otherwise slip through the max.
inline double relative_error(const std::vector<float>& actual, const std::vector<double>& expected) {
    constexpr double kInfinity = std::numeric_limits<double>::infinity();
    if (actual.size() != expected.size()) return kInfinity;
    double max_diff = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < actual.size(); ++i) {
        if (!std::isfinite(actual[i]) || !std::isfinite(expected[i])) return kInfinity;
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(actual[i]) - expected[i]));
        max_ref = std::max(max_ref, std::fabs(expected[i]));
    }
    return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

}  // namespace duet::testing
