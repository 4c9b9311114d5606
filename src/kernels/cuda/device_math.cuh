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

// Inclusive prefix sums of a and b over the lanes of a warp, in lane order (every lane calling).
template <typename T>
__device__ __forceinline__ void warp_inclusive_sums(T& a, T& b) {
    const int lane = threadIdx.x % kWarpSize;
#pragma unroll
    for (int offset = 1; offset < kWarpSize; offset *= 2) {
        const T a_below = __shfl_up_sync(0xFFFFFFFFu, a, offset);
        const T b_below = __shfl_up_sync(0xFFFFFFFFu, b, offset);
        if (lane >= offset) {
            a += a_below;
            b += b_below;
        }
    }
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
// 1/rms is applied to the finished sum). load(k) gives the 8 values of 16-byte group k. A row's
// lanes load every group of x between them, so NormedInput also sums x² on the way: reduced over
// the row's lanes that is the norm's sum of squares, with no extra pass over x and no block barrier.
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
    float squares = 0.0f;  // Σ x² over the groups this lane loaded
    __device__ __forceinline__ void load(int64_t k, float4& lo, float4& hi) {
        const float4 a = __ldg(x + 2 * k), b = __ldg(x + 2 * k + 1);
        squares += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
        const float4 g = __ldg(weight + 2 * k), h = __ldg(weight + 2 * k + 1);
        lo = make_float4(a.x * g.x, a.y * g.y, a.z * g.z, a.w * g.w);
        hi = make_float4(b.x * h.x, b.y * h.y, b.z * h.z, b.w * h.w);
    }
};

// An input a block has prepared in shared memory (a normalised input, x · norm_weight): the lower
// and upper float4 of each 16-byte group in separate halves, so that a row's lanes read consecutive
// words (no bank conflicts; reading a group's two float4 side by side took two passes a warp).
struct SharedInput {
    const float4* lower;  // [chunks]
    const float4* upper;  // [chunks]
    __device__ __forceinline__ void load(int64_t k, float4& lo, float4& hi) const {
        lo = lower[k];
        hi = upper[k];
    }
};

// The dot product of a bf16 row (`chunks` groups of 8, 16-byte aligned) with an input, by a group of
// kLanes consecutive lanes (a whole warp, or a part of one for short rows, so that every lane still
// has loads to issue): each lane keeps kLoads 16-byte weight loads in flight (the memory-bound
// decode's whole game); weights are streamed once, so they are loaded evict-first while the input
// stays cached. start() requests the first weights, which need nothing from earlier kernels, so a
// kernel launched early calls it before wait_for_inputs(); finish() reads the input and returns the
// sum to every lane of the group. Every lane of the warp must call finish() (the sum shuffles across
// the warp): a group without a row starts with chunks = 0. More loads a lane suit kernels whose rows
// are short enough to be read in one round of them.
template <int kLanes = kWarpSize, int kLoads = 4>
class RowDot {
    static_assert(kLanes == 8 || kLanes == 16 || kLanes == 32, "a row's lanes are 8, 16 or a whole warp");

public:
    __device__ __forceinline__ void start(const uint4* __restrict__ w_row, int64_t chunks) {
        w_ = w_row;
        chunks_ = chunks;
        c_ = threadIdx.x % kLanes;
        load_weights();
    }
    template <typename Input>
    __device__ __forceinline__ float finish(Input&& input) {
        float acc[kLoads] = {};
        while (c_ < chunks_) {
#pragma unroll
            for (int u = 0; u < kLoads; ++u) {
                const int64_t k = c_ + u * kLanes;
                if (k < chunks_) {
                    float4 lo, hi;
                    input.load(k, lo, hi);
                    acc[u] = dot8(wv_[u], lo, hi, acc[u]);
                }
            }
            c_ += kLoads * kLanes;
            load_weights();
        }
        float sum = 0.0f;
#pragma unroll
        for (int u = 0; u < kLoads; ++u) sum += acc[u];
        return group_sum(sum);
    }

    // Sum of `value` over the row's lanes; each of them gets it.
    static __device__ __forceinline__ float group_sum(float value) {
#pragma unroll
        for (int offset = kLanes / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
        return value;
    }

private:
    __device__ __forceinline__ void load_weights() {
#pragma unroll
        for (int u = 0; u < kLoads; ++u) {
            if (c_ + u * kLanes < chunks_) wv_[u] = __ldcs(w_ + c_ + u * kLanes);
        }
    }
    const uint4* w_ = nullptr;
    int64_t chunks_ = 0, c_ = 0;
    uint4 wv_[kLoads];
};

// Lanes per row for rows of `chunks` 16-byte groups: fewer for short rows, so each lane has at least
// a few loads to keep in flight.
inline int row_lanes(int64_t chunks) { return chunks >= 128 ? 32 : chunks >= 64 ? 16 : 8; }

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

// This thread's share of the sum of x[i]² over a block's threads. Four loads are in flight before
// the first is used, as float4 where x allows: a plain strided loop waits out one memory latency per
// value, which made a norm over a few thousand values cost more than the product after it.
__device__ __forceinline__ float thread_sum_squares(const float* __restrict__ x, int64_t count) {
    float sum = 0.0f;
    if (reinterpret_cast<uintptr_t>(x) % 16 == 0 && count % 4 == 0) {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        const int n4 = static_cast<int>(count / 4);
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            const float4 v = __ldg(x4 + i);
            sum += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    } else {
#pragma unroll 4
        for (int i = threadIdx.x; i < static_cast<int>(count); i += blockDim.x) sum += x[i] * x[i];
    }
    return sum;
}

// out[i] = weight[i] · x[i] · scale over a block's threads (float4 where all three allow).
__device__ __forceinline__ void scaled_product(const float* x, const float* __restrict__ weight, float scale,
                                               int64_t count, float* out) {
    if ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(weight) | reinterpret_cast<uintptr_t>(out)) %
                16 == 0 &&
        count % 4 == 0) {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        const float4* w4 = reinterpret_cast<const float4*>(weight);
        float4* o4 = reinterpret_cast<float4*>(out);
        const int n4 = static_cast<int>(count / 4);
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            const float4 v = x4[i], w = __ldg(w4 + i);
            o4[i] = make_float4(w.x * (v.x * scale), w.y * (v.y * scale), w.z * (v.z * scale), w.w * (v.w * scale));
        }
    } else {
#pragma unroll 4
        for (int i = threadIdx.x; i < static_cast<int>(count); i += blockDim.x) out[i] = weight[i] * (x[i] * scale);
    }
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

// The last-block pattern (the last block of a launch to finish works on what every block left):
// counts the calling block done in a device-wide counter and says whether it was the last of
// `blocks`. One thread calls it, after a __syncthreads that follows the block's stores; the count is
// one atomic with release and acquire semantics, so the block's stores are visible before its count
// and, in the last block, every other block's are visible once its threads pass the next
// __syncthreads (read them past L1). A fence then a plain atomic took two round trips to memory.
__device__ __forceinline__ bool count_block_last(unsigned* counter, unsigned blocks) {
    unsigned before;
    asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], 1;" : "=r"(before) : "l"(counter) : "memory");
    return before == blocks - 1;
}

}  // namespace duet::cuda
