// Small device-side helpers shared by the CUDA kernels. Needs nvcc.
#pragma once

#include <cstdint>

#include "kernels/cuda/early_launch.cuh"

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

// Dot product of 8 bf16 weights (one uint4) with 8 floats (two float4).
__device__ __forceinline__ float dot8(uint4 w, float4 x_lo, float4 x_hi, float acc) {
    acc = fmaf(bf16_low_to_float(w.x), x_lo.x, acc);
    acc = fmaf(bf16_high_to_float(w.x), x_lo.y, acc);
    acc = fmaf(bf16_low_to_float(w.y), x_lo.z, acc);
    acc = fmaf(bf16_high_to_float(w.y), x_lo.w, acc);
    acc = fmaf(bf16_low_to_float(w.z), x_hi.x, acc);
    acc = fmaf(bf16_high_to_float(w.z), x_hi.y, acc);
    acc = fmaf(bf16_low_to_float(w.w), x_hi.z, acc);
    acc = fmaf(bf16_high_to_float(w.w), x_hi.w, acc);
    return acc;
}

// What a product multiplies its weights with: x itself, or x times a norm's weights (the norm's
// 1/rms is applied to the finished sum). load(k) gives the 8 values of 16-byte group k.
struct PlainInput {
    const float4* __restrict__ x;
    __device__ __forceinline__ void load(int64_t k, float4& lo, float4& hi) const {
        lo = __ldg(x + 2 * k);
        hi = __ldg(x + 2 * k + 1);
    }
};
struct NormedInput {
    const float4* __restrict__ x;
    const float4* __restrict__ weight;
    __device__ __forceinline__ void load(int64_t k, float4& lo, float4& hi) const {
        const float4 a = __ldg(x + 2 * k), b = __ldg(x + 2 * k + 1);
        const float4 g = __ldg(weight + 2 * k), h = __ldg(weight + 2 * k + 1);
        lo = make_float4(a.x * g.x, a.y * g.y, a.z * g.z, a.w * g.w);
        hi = make_float4(b.x * h.x, b.y * h.y, b.z * h.z, b.w * h.w);
    }
};

// One warp's dot product of a bf16 row (`chunks` groups of 8, 16-byte aligned) with an input: each
// lane keeps four 16-byte weight loads in flight (the memory-bound decode's whole game); weights
// are streamed once, so they are loaded evict-first while the input stays cached. start() requests
// the first weights, which need nothing from earlier kernels, so a kernel launched early calls it
// before wait_for_inputs(); finish() reads the input and returns the sum to every lane.
class WarpRowDot {
public:
    __device__ __forceinline__ void start(const uint4* __restrict__ w_row, int64_t chunks) {
        w_ = w_row;
        chunks_ = chunks;
        c_ = threadIdx.x % kWarpSize;
        load_weights();
    }
    template <typename Input>
    __device__ __forceinline__ float finish(const Input& input) {
        float acc[kLoads] = {};
        while (c_ < chunks_) {
#pragma unroll
            for (int u = 0; u < kLoads; ++u) {
                const int64_t k = c_ + u * kWarpSize;
                if (k < chunks_) {
                    float4 lo, hi;
                    input.load(k, lo, hi);
                    acc[u] = dot8(wv_[u], lo, hi, acc[u]);
                }
            }
            c_ += kLoads * kWarpSize;
            load_weights();
        }
        float sum = 0.0f;
#pragma unroll
        for (int u = 0; u < kLoads; ++u) sum += acc[u];
        return warp_sum(sum);
    }

private:
    static constexpr int kLoads = 4;
    __device__ __forceinline__ void load_weights() {
#pragma unroll
        for (int u = 0; u < kLoads; ++u) {
            if (c_ + u * kWarpSize < chunks_) wv_[u] = __ldcs(w_ + c_ + u * kWarpSize);
        }
    }
    const uint4* w_ = nullptr;
    int64_t chunks_ = 0, c_ = 0;
    uint4 wv_[kLoads];
};

// The plain form: one warp's row · x, for kernels that need no early start.
__device__ __forceinline__ float warp_row_dot_bf16x8(const uint4* __restrict__ w_row, const float4* __restrict__ x,
                                                     int64_t chunks) {
    WarpRowDot dot;
    dot.start(w_row, chunks);
    return dot.finish(PlainInput{x});
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
