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

// Activations as PyTorch defines them (and the CPU kernels compute them).
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Sum over a whole block of `blockDim.x` threads (a multiple of 32, at most 1024); every thread
// gets the result. `shared` holds at least 32 floats.
__device__ __forceinline__ float block_sum(float value, float* shared) {
    value = warp_sum(value);
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    __syncthreads();
    if (lane == 0) shared[warp] = value;
    __syncthreads();
    const int warps = blockDim.x / kWarpSize;
    float total = 0.0f;
    for (int w = 0; w < warps; ++w) total += shared[w];
    return total;
}

// Maximum over a whole block, as block_sum.
__device__ __forceinline__ float block_max(float value, float* shared) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, offset));
    }
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    __syncthreads();
    if (lane == 0) shared[warp] = value;
    __syncthreads();
    const int warps = blockDim.x / kWarpSize;
    float best = shared[0];
    for (int w = 1; w < warps; ++w) best = fmaxf(best, shared[w]);
    return best;
}

}  // namespace duet::cuda
