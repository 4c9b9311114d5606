#include "kernels/cpu/rope.h"

#include <cmath>

namespace duet::cpu {

void rope_angles(int64_t position, int64_t rotary_dim, float theta, float* cos_out, float* sin_out) {
    const int64_t half = rotary_dim / 2;
    for (int64_t i = 0; i < half; ++i) {
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
        const float inv_freq = 1.0f / std::pow(theta, exponent);
        const float angle = static_cast<float>(position) * inv_freq;
        cos_out[i] = std::cos(angle);
        sin_out[i] = std::sin(angle);
    }
}

void rope_rotate_half(float* x, int64_t rotary_dim, const float* cos, const float* sin) {
    const int64_t half = rotary_dim / 2;
    for (int64_t i = 0; i < half; ++i) {
        const float x1 = x[i], x2 = x[i + half];
        x[i] = x1 * cos[i] - x2 * sin[i];
        x[i + half] = x2 * cos[i] + x1 * sin[i];
    }
}

void rope_interleaved(float* x, int64_t rotary_dim, const float* cos, const float* sin) {
    for (int64_t i = 0; i < rotary_dim / 2; ++i) {
        const float x1 = x[2 * i], x2 = x[2 * i + 1];
        x[2 * i] = x1 * cos[i] - x2 * sin[i];
        x[2 * i + 1] = x2 * cos[i] + x1 * sin[i];
    }
}

}  // namespace duet::cpu
