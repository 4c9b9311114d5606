// A mixture-of-experts layer of a few tokens in two launches: every chosen expert's first product
// and the shared expert's in one, then every down product, the routing weights, the shared
// expert's gate and the residual add in the other. Each launch streams all the weights it needs
// once; splitting the layer into more kernels costs a kernel's fixed start and drain each time,
// which at decode sizes is as long as reading the shared expert itself.
#include <algorithm>
#include <limits>

#include "kernels/cuda/alignment.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/early_launch.cuh"
#include "kernels/cuda/norm_ahead.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;

// How the first launch's blocks are laid out: the shared expert's row blocks of every token first
// (they need nothing from the routing, so they start while it finishes), then each routed slot's.
struct FirstGrid {
    int64_t shared_blocks;  // a token's
    int64_t routed_blocks;  // a slot's
    int64_t shared_total;   // all tokens'
};

// What block `block` computes: the slot's expert (read for routed slots), token, rows and output.
struct FirstBlock {
    bool shared;
    int64_t slot, token, row_block, rows;
    float* out;
};

__device__ __forceinline__ FirstBlock first_block(const ExpertFirstArgs& a, const FirstGrid& g, int64_t block) {
    if (block < g.shared_total) {
        const int64_t token = block / g.shared_blocks;
        return {true, -1, token, block % g.shared_blocks, a.shared_rows, a.shared_out + token * a.shared_rows};
    }
    block -= g.shared_total;
    const int64_t slot = block / g.routed_blocks;
    return {false, slot, slot / a.slots_per_token, block % g.routed_blocks, a.routed_rows,
            a.routed_out + slot * a.routed_rows};
}

// A block's rows of relu²(first · x), or of silu(first · x) · (second · x).
template <bool kSwiglu, int kLanes, int kLoads>
__global__ void __launch_bounds__(kThreads) expert_first_kernel(ExpertFirstArgs a, FirstGrid g) {
    const FirstBlock s = first_block(a, g, blockIdx.x);
    const int64_t row = (s.row_block * kThreads + threadIdx.x) / kLanes;
    const bool active = row < s.rows;
    const int64_t offset = (active ? row : 0) * a.chunks, count = active ? a.chunks : 0;
    RowDot<kLanes, kLoads> first, second;
    int expert = a.shared_index;
    if (s.shared) {
        // The shared expert's weights need nothing from earlier kernels: request them first.
        first.start(static_cast<const uint4*>(a.first[expert]) + offset, count);
        if (kSwiglu) second.start(static_cast<const uint4*>(a.second[expert]) + offset, count);
        wait_for_inputs();
    } else {
        wait_for_inputs();  // the expert is chosen by the kernel before
        expert = a.expert_of[s.slot];
        first.start(static_cast<const uint4*>(a.first[expert]) + offset, count);
        if (kSwiglu) second.start(static_cast<const uint4*>(a.second[expert]) + offset, count);
    }
    // The down launch may start now: its blocks look up the routing and request their first rows
    // while this launch streams (see expert_down_kernel).
    allow_next_kernel();
    const PlainInput input{reinterpret_cast<const float4*>(a.x + s.token * a.chunks * 8)};
    float value = first.finish(input);
    if (kSwiglu) {
        value = silu(value) * second.finish(input);
    } else {
        value = fmaxf(value, 0.0f);
        value *= value;
    }
    if (active && threadIdx.x % kLanes == 0) s.out[row] = value;
}

// Most sources a row of the down launch sums: the chosen experts and the shared one.
constexpr int kMaxDownSources = 65;

// A token's sources of the down launch (its chosen experts, then the shared one where there is
// one), the 16-byte groups of source j's row and input, and all its sources' input groups.
__host__ __device__ __forceinline__ int64_t down_sources(const ExpertDownArgs& a) {
    return a.k + (a.shared_index >= 0 ? 1 : 0);
}
__host__ __device__ __forceinline__ int64_t down_source_chunks(const ExpertDownArgs& a, int64_t j) {
    return j < a.k ? a.routed_chunks : a.shared_chunks;
}
__host__ __device__ __forceinline__ int64_t down_input_groups(const ExpertDownArgs& a) {
    return a.k * a.routed_chunks + (a.shared_index >= 0 ? a.shared_chunks : 0);
}

// Token `token`'s sources of the down launch, looked up once a block into shared memory (so that a
// lane's reads of a source's row wait on no other load): each one's matrix and weight (the routing
// weight, or the shared expert's gate). Returns their number; ends with the block's barrier.
//
// The routing was written by the gate, which had finished (and its writes were visible) before the
// first launch's blocks passed their wait, so before a down launch began: the look-ups may go before
// the down kernel's wait. They are read past L1 (ld.global.cg), which may still hold the last layer's.
__device__ __forceinline__ int look_up_sources(const ExpertDownArgs& a, int64_t token, const uint4** matrix,
                                               float* weight) {
    const int sources = static_cast<int>(down_sources(a));
    for (int j = threadIdx.x; j < sources; j += blockDim.x) {
        if (j < a.k) {
            matrix[j] = static_cast<const uint4*>(a.down[__ldcg(a.expert_of + token * a.k + j)]);
            weight[j] = __ldcg(a.weights + token * a.k + j);
        } else {
            matrix[j] = static_cast<const uint4*>(a.down[a.shared_index]);
            weight[j] = a.shared_gate_logit != nullptr ? sigmoid(__ldcg(a.shared_gate_logit + token)) : 1.0f;
        }
    }
    __syncthreads();
    return sources;
}

// Block (row block, token): out[token, row] += Σ_j w_j · (down_{e_j} row · mid_j) + g · (shared row ·
// shared mid), for the kWarpSize / kLanes rows a warp covers. The block first looks up its sources
// (look_up_sources). Its kSourceWarps warps share out the sources (their sums added through shared
// memory at the end), each reading a row in one round of kLoads loads a lane where it is short
// enough, kBatch sources at a time: so the loads of all of a row's sources go out together, rather
// than in rounds that each wait out the memory's latency.
//
// The first launch lets this one start as soon as its own blocks are under way, and the look-ups
// and the first batch of rows go out before the wait.
template <int kLanes, int kLoads, int kBatch, int kSourceWarps, int kMinBlocks>
__global__ void __launch_bounds__(kSourceWarps* kWarpSize, kMinBlocks) expert_down_kernel(ExpertDownArgs a) {
    __shared__ const uint4* matrix[kMaxDownSources];
    __shared__ float weight[kMaxDownSources];
    __shared__ float warp_sums[kSourceWarps][kWarpSize];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int64_t token = blockIdx.y;
    const int64_t row = int64_t(blockIdx.x) * (kWarpSize / kLanes) + lane / kLanes;
    const bool active = row < a.rows;
    const bool owner = warp == 0 && active && lane % kLanes == 0;  // the lane that adds the row to the stream
    const float ahead_weight = a.ahead.on() && owner ? __ldg(a.ahead.weight + row) : 0.0f;
    const int sources = look_up_sources(a, token, matrix, weight);
    const int64_t r = active ? row : 0;
    auto input_of = [&](int j) {
        const float* mid = j < a.k ? a.routed_mid + (token * a.k + j) * a.routed_chunks * 8
                                   : a.shared_mid + token * a.shared_chunks * 8;
        return PlainInput{reinterpret_cast<const float4*>(mid)};
    };
    const int per_warp = (sources + kSourceWarps - 1) / kSourceWarps;
    const int first = warp * per_warp, end = min(sources, first + per_warp);
    float sum = 0.0f;
    for (int j = first; j < end; j += kBatch) {
        RowDot<kLanes, kLoads> dot[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const bool real = j + b < end;
            dot[b].start(matrix[real ? j + b : j] + r * down_source_chunks(a, real ? j + b : j),
                         real && active ? down_source_chunks(a, j + b) : 0);
        }
        if (j == first) wait_for_inputs();  // the expert outputs are the first launch's
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const bool real = j + b < end;
            const float value = dot[b].finish(input_of(real ? j + b : j));
            if (real) sum += weight[j + b] * value;
        }
    }
    wait_for_inputs();  // (a warp without sources has not waited yet)
    if (kSourceWarps > 1) {
        warp_sums[warp][lane] = sum;
        __syncthreads();
        sum = 0.0f;
#pragma unroll
        for (int w = 0; w < kSourceWarps; ++w) sum += warp_sums[w][lane];
    }
    allow_next_kernel();
    if (warp == 0) {
        const float value = owner ? a.out[token * a.rows + row] + sum : 0.0f;
        if (owner) a.out[token * a.rows + row] = value;
        if (a.ahead.on()) write_norm_ahead(a.ahead, owner, row, value, ahead_weight);
    }
}

// The same sum for short rows, kRows rows a block, a whole warp each over up to kSources sources of
// at most kLoads · 32 groups, every weight load of a row in flight at once. The block stages every
// source's input in shared memory once, after the wait: read by each of a few rows' warps from L2
// instead, the inputs (f32) were as many bytes as the weights (bf16), and each came in its own trip
// after the weights.
template <int kRows, int kLoads, int kSources, int kMinBlocks>
__global__ void __launch_bounds__(kRows* kWarpSize, kMinBlocks) expert_down_tile_kernel(ExpertDownArgs a) {
    extern __shared__ float4 staged[];  // lower halves of every source's groups, then the upper halves
    __shared__ const uint4* matrix[kSources];
    __shared__ float weight[kSources];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int64_t token = blockIdx.y;
    const int64_t row = int64_t(blockIdx.x) * kRows + warp;
    const bool active = row < a.rows;
    const bool owner = active && lane == 0;
    const float ahead_weight = a.ahead.on() && owner ? __ldg(a.ahead.weight + row) : 0.0f;
    const int sources = look_up_sources(a, token, matrix, weight);
    uint4 w[kSources][kLoads];
#pragma unroll
    for (int j = 0; j < kSources; ++j) {
        if (j < sources && active) {
            const uint4* m = matrix[j] + row * down_source_chunks(a, j);
#pragma unroll
            for (int u = 0; u < kLoads; ++u) {
                if (lane + u * kWarpSize < down_source_chunks(a, j)) w[j][u] = __ldcs(m + lane + u * kWarpSize);
            }
        }
    }
    wait_for_inputs();  // the expert outputs are the first launch's
    // Qwen3.5-MoE's 2048 rows are one wave on an H100 or H200, every block already resident: the
    // next kernel (the next layer's in-projection) may launch now, its blocks taking the room left
    // and requesting their weights.
    // Measured on an H100: a Drama 3 frame 3.462-3.479 ms against 3.489-3.507 released at the end.
    allow_next_kernel();
    const int64_t routed_groups = a.k * a.routed_chunks, groups = down_input_groups(a);
    const float4* routed = reinterpret_cast<const float4*>(a.routed_mid + token * routed_groups * 8);
    const float4* shared = reinterpret_cast<const float4*>(a.shared_mid + token * a.shared_chunks * 8);
    for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
        const float4* group = g < routed_groups ? routed + 2 * g : shared + 2 * (g - routed_groups);
        staged[g] = __ldg(group);
        staged[groups + g] = __ldg(group + 1);
    }
    __syncthreads();
    float sum = 0.0f;  // this lane's share of Σ_j weight_j · (row_j · input_j)
#pragma unroll
    for (int j = 0; j < kSources; ++j) {
        if (j < sources && active) {
            const float4* lower = staged + j * a.routed_chunks;
            float dot = 0.0f;
#pragma unroll
            for (int u = 0; u < kLoads; ++u) {
                const int c = lane + u * kWarpSize;
                if (c < down_source_chunks(a, j)) dot = dot8(w[j][u], lower[c], lower[groups + c], dot);
            }
            sum += weight[j] * dot;
        }
    }
    sum = warp_sum(sum);
    const float value = owner ? a.out[token * a.rows + row] + sum : 0.0f;
    if (owner) a.out[token * a.rows + row] = value;
    if (a.ahead.on()) write_norm_ahead(a.ahead, owner, row, value, ahead_weight);
}

template <bool kSwiglu, int kLanes, int kLoads>
void launch_first(const ExpertFirstArgs& a, int64_t tokens, cudaStream_t stream) {
    constexpr int64_t kRowsPerBlock = kThreads / kLanes;
    FirstGrid g;
    g.shared_blocks = a.shared_index >= 0 ? (a.shared_rows + kRowsPerBlock - 1) / kRowsPerBlock : 0;
    g.routed_blocks = (a.routed_rows + kRowsPerBlock - 1) / kRowsPerBlock;
    g.shared_total = g.shared_blocks * tokens;
    const int64_t blocks = g.shared_total + g.routed_blocks * a.routed_slots;
    require(blocks <= std::numeric_limits<int>::max(), "expert_first: ", blocks, " blocks exceed the grid limit");
    launch_early(expert_first_kernel<kSwiglu, kLanes, kLoads>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                 stream, "expert_first_kernel", a, g);
}

template <int kLanes, int kLoads, int kBatch, int kSourceWarps, int kMinBlocks>
void launch_down(const ExpertDownArgs& a, int64_t tokens, cudaStream_t stream) {
    constexpr int64_t kRowsPerBlock = kWarpSize / kLanes;
    launch_early(expert_down_kernel<kLanes, kLoads, kBatch, kSourceWarps, kMinBlocks>,
                 dim3(static_cast<unsigned>((a.rows + kRowsPerBlock - 1) / kRowsPerBlock),
                      static_cast<unsigned>(tokens)),
                 dim3(kSourceWarps * kWarpSize), 0, stream, "expert_down_kernel", a);
}

// The staged inputs of a tile block: under the 48 KiB a launch gets without opting in, with room
// left for the block's look-ups.
constexpr size_t kTileMaxStagedBytes = 47 * 1024;

// Launches the tile kernel; false where its sources, their rows or their staged inputs would not fit.
template <int kRows, int kLoads, int kSources, int kMinBlocks>
bool launch_down_tiles(const ExpertDownArgs& a, int64_t tokens, cudaStream_t stream) {
    const size_t bytes = size_t(down_input_groups(a)) * 2 * sizeof(float4);
    constexpr int64_t kMaxChunks = int64_t(kLoads) * kWarpSize;
    if (down_sources(a) > kSources || a.routed_chunks > kMaxChunks || a.shared_chunks > kMaxChunks ||
        bytes > kTileMaxStagedBytes)
        return false;
    launch_early(expert_down_tile_kernel<kRows, kLoads, kSources, kMinBlocks>,
                 dim3(static_cast<unsigned>((a.rows + kRows - 1) / kRows), static_cast<unsigned>(tokens)),
                 dim3(kRows * kWarpSize), bytes, stream, "expert_down_tile_kernel", a);
    return true;
}

}  // namespace

bool expert_layer_fits(int64_t hidden, int64_t routed_inter, int64_t shared_inter, int64_t slots) {
    return hidden % 8 == 0 && routed_inter % 8 == 0 && shared_inter % 8 == 0 && slots <= 65535;
}

void expert_first(const ExpertFirstArgs& a, int64_t tokens, cudaStream_t stream) {
    require(a.chunks > 0 && aligned_16(a.x), "expert_first: inputs must be whole, aligned 16-byte groups");
    if (a.routed_slots + tokens == 0) return;
    const bool swiglu = a.second != nullptr;
    // Relu² rows of 128 or more groups take 11 loads a lane: Nemotron-H's 336 in one round (8 loads
    // took two; measured 0.01-0.03 ms a token slower). SwiGLU rows take 8 of each matrix: Qwen3.5-MoE's
    // 256 groups in one round (4 took two; measured 0.02-0.03 ms a frame slower on Drama 3).
    switch (row_lanes(a.chunks)) {
        case 32:
            swiglu ? launch_first<true, 32, 8>(a, tokens, stream) : launch_first<false, 32, 11>(a, tokens, stream);
            break;
        case 16:
            swiglu ? launch_first<true, 16, 4>(a, tokens, stream) : launch_first<false, 16, 4>(a, tokens, stream);
            break;
        default:
            swiglu ? launch_first<true, 8, 4>(a, tokens, stream) : launch_first<false, 8, 4>(a, tokens, stream);
            break;
    }
}

void expert_down(const ExpertDownArgs& a, int64_t tokens, cudaStream_t stream) {
    require(a.k + 1 <= kMaxDownSources, "expert_down: ", a.k, " experts a token exceed the kernel's ",
            kMaxDownSources - 1);
    require(aligned_16(a.routed_mid) && (a.shared_index < 0 || aligned_16(a.shared_mid)),
            "expert_down: inputs must be aligned 16-byte groups");
    require(!a.ahead.on() || tokens == 1, "expert_down: a norm is prepared ahead for one token, not ", tokens);
    if (tokens == 0 || a.rows == 0) return;
    // Rows of up to 64 groups (Qwen3.5-MoE's 64) and up to 9 sources (its 8 chosen and the shared
    // one) go by tiles of 8 rows, a warp a row, all of its 18 loads a lane at once; 2 blocks an SM
    // (104 registers) make Qwen3.5-MoE's 2048 rows one wave. Measured on an H100 against the kernel
    // below: alone 14.1-14.5 µs a layer against 18.1-18.2 (ncu), a Drama 3 frame 3.497-3.501 ms against
    // 3.610-3.616; tiles of 4 rows 3.518-3.519, the kernel below with a whole warp a row 3.580-3.586.
    if (launch_down_tiles<8, 2, 9, 2>(a, tokens, stream)) return;
    switch (row_lanes(a.routed_chunks)) {
        // Rows of 128 or more groups: 8 loads a lane read up to 256 groups (Nemotron-H's 232) at once.
        // Shorter rows take three sources at a time. A row's sources are shared out over the block's
        // warps: 4 for Nemotron-H's 7 (measured faster than 2, 7 or 8). Nemotron-H's 2688 blocks take
        // several waves: at 6 blocks an SM (80 registers) they ran 0.05 ms a token faster than at 8
        // (64 registers).
        case 32: launch_down<32, 8, 1, 4, 6>(a, tokens, stream); break;
        case 16: launch_down<16, 4, 3, 3, 8>(a, tokens, stream); break;
        default: launch_down<8, 4, 3, 3, 8>(a, tokens, stream); break;
    }
}

}  // namespace duet::cuda
