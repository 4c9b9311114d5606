// Pieces the chunked prompt kernels share (delta_rule_chunked.cu, ssm_scan_chunked.cu). Both hold a
// chunk of up to kChunkRows tokens in shared memory, a block working kChunkColumns columns of the
// values (a warp's lanes) and its warps taking chunk rows warp, warp + warps, …. Needs nvcc.
#pragma once

#include <cstdint>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/device_math.cuh"

namespace duet::cuda {

constexpr int kChunkRows = 64;           // tokens a chunk's arrays hold
constexpr int kChunkColumns = kWarpSize;  // value columns a block: a warp's lanes
static_assert(kChunkRows == 2 * kWarpSize, "a lane holds two entries of a chunk's row");

// values[0 .. kChunkRows) replaced by their running sums, by one whole warp.
__device__ __forceinline__ void warp_running_sum_64(float* values) {
    const int lane = threadIdx.x % kWarpSize;
    float low = values[lane], high = values[lane + kWarpSize];
#pragma unroll
    for (int offset = 1; offset < kWarpSize; offset *= 2) {
        const float l = __shfl_up_sync(0xFFFFFFFFu, low, offset), u = __shfl_up_sync(0xFFFFFFFFu, high, offset);
        if (lane >= offset) low += l, high += u;
    }
    high += __shfl_sync(0xFFFFFFFFu, low, kWarpSize - 1);
    values[lane] = low;
    values[lane + kWarpSize] = high;
}

// A chunk's decays from its tokens' log-decays G [kChunkRows] (zero past len), by the whole block:
// G becomes their running sum, growth[i] = e^{G_i} and to_end[j] = e^{G_last − G_j} · scale[j] (scale
// null: 1), zero past len. Ends with the block's barrier.
__device__ __forceinline__ void chunk_decays(float* G, float* growth, float* to_end, const float* scale, int len) {
    __syncthreads();
    if (threadIdx.x < kWarpSize) warp_running_sum_64(G);
    __syncthreads();
    const int i = threadIdx.x;
    if (i < kChunkRows) {
        growth[i] = expf(G[i]);
        to_end[i] = i < len ? expf(G[len - 1] - G[i]) * (scale != nullptr ? scale[i] : 1.0f) : 0.0f;
    }
    __syncthreads();
}

__device__ __forceinline__ float dot4(float4 x, float4 y, float acc) {
    return fmaf(x.w, y.w, fmaf(x.z, y.z, fmaf(x.y, y.y, fmaf(x.x, y.x, acc))));
}

// Asks (cp.async, for the caller to commit) for rows [0, len) of two matrices of `width` floats (a
// multiple of 4) into shared `to[0]` and `to[1]` (rows `to_row` floats apart, 16-byte aligned), row i
// of matrix m from `from + i · stride + offset[m]`; rows up to kChunkRows past len are zeroed. Every
// thread of the block calls it.
__device__ __forceinline__ void copy_chunk_rows(float* const (&to)[2], int64_t to_row, const float* from,
                                                int64_t stride, const int64_t (&offset)[2], int64_t width, int len) {
    const int64_t groups = width / 4;
    for (int64_t e = threadIdx.x; e < 2 * kChunkRows * groups; e += blockDim.x) {
        const int64_t i = e / (2 * groups), rest = e % (2 * groups), m = rest / groups, c = 4 * (rest % groups);
        float* dst = to[m] + i * to_row + c;
        if (i < len) {
            copy_async_16(dst, from + i * stride + offset[m] + c);
        } else {
            *reinterpret_cast<float4*>(dst) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
}

// Asks (cp.async) for the block's column of rows [0, len), `from + i · stride` (a lane's own, where
// `owns` it), into shared `to` [kChunkRows][kChunkColumns]; the rest zeroed. Warp w takes rows w,
// w + warps, ….
__device__ __forceinline__ void copy_chunk_column(float* to, const float* from, int64_t stride, bool owns, int len,
                                                  int warps) {
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    for (int i = warp; i < kChunkRows; i += warps) {
        if (i < len && owns) {
            copy_async_4(to + i * kChunkColumns + lane, from + i * stride);
        } else {
            to[i * kChunkColumns + lane] = 0.0f;
        }
    }
}

// acc[s] = base[row][lane] + Σ_j M[row][j] · V[j][lane] for the warp's rows row = warp + s · kWarps: a
// chunk's square matrix M [kChunkRows][kChunkRows] times the block's columns V and base
// [kChunkRows][kChunkColumns].
template <int kWarps>
__device__ __forceinline__ void chunk_product_plus(const float* base, const float* M, const float* V,
                                                   float (&acc)[kChunkRows / kWarps]) {
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
    for (int s = 0; s < kChunkRows / kWarps; ++s) acc[s] = base[(warp + s * kWarps) * kChunkColumns + lane];
    for (int j = 0; j < kChunkRows; ++j) {
        const float vj = V[j * kChunkColumns + lane];
#pragma unroll
        for (int s = 0; s < kChunkRows / kWarps; ++s) {
            acc[s] = fmaf(M[(warp + s * kWarps) * kChunkRows + j], vj, acc[s]);
        }
    }
}

// The state's slice after a chunk, S [dim][kChunkColumns] in place:
//   S[k][lane] ← total · S[k][lane] + Σ_{j < len} keys[j][k] · weight[j] · V[j][lane],
// keys rows `key_row` floats apart; warp w takes rows k = w, w + kWarps, …, four at a time.
template <int kWarps>
__device__ __forceinline__ void update_chunk_state(float* S, const float* keys, int64_t key_row, const float* V,
                                                   const float* weight, float total, int64_t dim, int len) {
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    for (int64_t k0 = warp; k0 < dim; k0 += 4 * kWarps) {
        float acc[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int64_t k = k0 + r * kWarps;
            acc[r] = k < dim ? S[k * kChunkColumns + lane] * total : 0.0f;
        }
        for (int j = 0; j < len; ++j) {
            const float vj = V[j * kChunkColumns + lane] * weight[j];
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int64_t k = k0 + r * kWarps;
                if (k < dim) acc[r] = fmaf(keys[j * key_row + k], vj, acc[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int64_t k = k0 + r * kWarps;
            if (k < dim) S[k * kChunkColumns + lane] = acc[r];
        }
    }
}

}  // namespace duet::cuda
