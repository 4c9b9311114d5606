// Small device-side helpers shared by the CUDA kernels. Needs nvcc.
#pragma once

#include <cstdint>

namespace duet::cuda {

constexpr int kWarpSize = 32;

// bf16 is the top half of an IEEE float, so widening is a shift: exact and
// cheaper than going through the cuda_bf16.h intrinsics.
__device__ __forceinline__ float bf16_bits_to_float(uint16_t bits) {
    return __uint_as_float(uint32_t(bits) << 16);
}

// Two bf16 values packed little-endian in one 32-bit word: the element at the
// lower address is in the low half.
__device__ __forceinline__ float bf16_low_to_float(uint32_t pair) {
    return __uint_as_float(pair << 16);
}
__device__ __forceinline__ float bf16_high_to_float(uint32_t pair) {
    return __uint_as_float(pair & 0xFFFF0000u);
}

// Sum of `value` over the 32 lanes of a full warp; every lane gets the result.
template <typename T>
__device__ __forceinline__ T warp_sum(T value) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
    }
    return value;
}

}  // namespace duet::cuda
