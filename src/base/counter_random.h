// The counter-based generator behind random weights: splitmix64 of a key, so element i of a tensor
// is a function of (key + i) alone and can be made anywhere, in any order. One definition for the
// host (RandomTensorWriter) and the GPU (kernels/cuda/random_bf16.cu), which must agree bit for bit.
#pragma once

#include <bit>
#include <cstdint>

#include "base/host_device.h"

namespace duet::counter_random {

DUET_HOST_DEVICE inline uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Uniform in [0, 1): the top 24 bits of mix(key), exact in a float.
DUET_HOST_DEVICE inline float unit(uint64_t key) { return static_cast<float>(mix(key) >> 40) * (1.0f / 16777216.0f); }

// lo + (hi - lo) * unit(key), each operation rounded on its own: the GPU compiler would otherwise
// fuse the multiply and the add, and the values would differ from the host's in the last bit.
DUET_HOST_DEVICE inline float uniform(uint64_t key, float lo, float hi) {
    const float span = hi - lo;
#if defined(__CUDA_ARCH__)
    return __fadd_rn(lo, __fmul_rn(span, unit(key)));
#else
    const float scaled = span * unit(key);
    return lo + scaled;
#endif
}

// A float rounded to bf16 bits, to nearest with ties to even; a NaN stays a quiet NaN
// (the same rounding as f32_to_bf16 in base/half.h).
DUET_HOST_DEVICE inline uint16_t bf16_bits(float f) {
#if defined(__CUDA_ARCH__)
    const uint32_t x = __float_as_uint(f);
#else
    const uint32_t x = std::bit_cast<uint32_t>(f);
#endif
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
    const uint32_t lsb = (x >> 16) & 1u;
    return static_cast<uint16_t>((x + 0x7FFFu + lsb) >> 16);
}

// Element `index` of a bf16 tensor uniform in [lo, hi) drawn from `key`.
DUET_HOST_DEVICE inline uint16_t uniform_bf16(uint64_t key, uint64_t index, float lo, float hi) {
    return bf16_bits(uniform(key + index, lo, hi));
}

}  // namespace duet::counter_random
