// Scalar activation functions, written to match PyTorch's definitions.
#pragma once

#include <cmath>

namespace duet::cpu {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// torch.nn.functional.softplus with its default threshold of 20: linear above it.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Exact GELU (torch's default, approximate="none"): x·Φ(x).
inline float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

inline float relu2(float x) {
    float r = x > 0.0f ? x : 0.0f;
    return r * r;
}

}  // namespace duet::cpu
