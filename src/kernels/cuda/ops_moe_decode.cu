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
#include "kernels/cuda/occupancy.h"
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
        if (a.slot_first != nullptr) {
            // Read past L1, which may still hold the last layer's.
            const auto* slot_first = reinterpret_cast<const unsigned long long*>(a.slot_first);
            first.start(reinterpret_cast<const uint4*>(__ldcg(slot_first + s.slot)) + offset, count);
            if (kSwiglu) {
                const auto* slot_second = reinterpret_cast<const unsigned long long*>(a.slot_second);
                second.start(reinterpret_cast<const uint4*>(__ldcg(slot_second + s.slot)) + offset, count);
            }
        } else {
            expert = a.expert_of[s.slot];
            first.start(static_cast<const uint4*>(a.first[expert]) + offset, count);
            if (kSwiglu) second.start(static_cast<const uint4*>(a.second[expert]) + offset, count);
        }
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
// one) and the 16-byte groups of source j's row and input.
__host__ __device__ __forceinline__ int64_t down_sources(const ExpertDownArgs& a) {
    return a.k + (a.shared_index >= 0 ? 1 : 0);
}
__host__ __device__ __forceinline__ int64_t down_source_chunks(const ExpertDownArgs& a, int64_t j) {
    return j < a.k ? a.routed_chunks : a.shared_chunks;
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

// The same sum by parts of rows: each source's row is cut into parts of at most one round of kLoads
// loads a lane, and a block of one warp a part reads kRows rows of every part at once, all of its
// loads out before the wait. A warp looks up its own source (no barrier before its loads) and pays
// that look-up once for the block's kRows rows, reads each of its input groups once for all of them,
// and the parts' sums meet in shared memory, added in the parts' order. One warp a row and source,
// in one round, is how the first launch reads; the kernel above, whose warps each take several
// sources in turn, read Nemotron-H's down rows at 0.58 of the DRAM peak alone where the first launch
// read the same bytes at 0.70.
template <int kLoads>
__host__ __device__ __forceinline__ int64_t parts_of_row(int64_t chunks) {
    constexpr int64_t kGroups = int64_t(kLoads) * kWarpSize;
    return (chunks + kGroups - 1) / kGroups;
}
template <int kLoads>
__host__ __device__ __forceinline__ int64_t down_parts(const ExpertDownArgs& a) {
    return a.k * parts_of_row<kLoads>(a.routed_chunks) +
           (a.shared_index >= 0 ? parts_of_row<kLoads>(a.shared_chunks) : 0);
}

// Part `part` of a token's sources: its source (k: the shared expert) and its groups [first, first + count).
struct DownPart {
    int64_t source, first, count;
};
template <int kLoads>
__device__ __forceinline__ DownPart down_part(const ExpertDownArgs& a, int64_t part) {
    const int64_t routed_parts = parts_of_row<kLoads>(a.routed_chunks);
    const bool routed = part < a.k * routed_parts;
    const int64_t chunks = routed ? a.routed_chunks : a.shared_chunks;
    const int64_t parts = routed ? routed_parts : parts_of_row<kLoads>(a.shared_chunks);
    const int64_t index = routed ? part % routed_parts : part - a.k * routed_parts;
    const int64_t per = (chunks + parts - 1) / parts;  // parts of even size: no short last one
    const int64_t first = index * per;
    return {routed ? part / routed_parts : a.k, first, min(per, chunks - first)};
}

// The down matrix of a routed slot (the gate's, or the table's entry for the slot's expert: one trip
// to memory or two) or of the shared expert (none where the caller gave it).
__device__ __forceinline__ const void* down_matrix(const ExpertDownArgs& a, bool routed, int64_t slot) {
    if (!routed) return a.shared_down != nullptr ? a.shared_down : a.down[a.shared_index];
    if (a.slot_down != nullptr) {
        return reinterpret_cast<const void*>(__ldcg(reinterpret_cast<const unsigned long long*>(a.slot_down) + slot));
    }
    return a.down[__ldcg(a.expert_of + slot)];
}

template <int kRows, int kLoads, int kMaxWarps, int kMinBlocks>
__global__ void __launch_bounds__(kMaxWarps* kWarpSize, kMinBlocks)
    expert_down_parts_kernel(ExpertDownArgs a, bool one_wave) {
    __shared__ float part_sums[kMaxWarps][kRows];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int64_t token = blockIdx.y, first_row = int64_t(blockIdx.x) * kRows;
    const DownPart p = down_part<kLoads>(a, warp);
    const bool routed = p.source < a.k;
    const int64_t chunks = routed ? a.routed_chunks : a.shared_chunks;
    // The routing was written before the first launch's blocks passed their wait (see look_up_sources).
    const int64_t slot = token * a.k + p.source;
    const auto* matrix = static_cast<const uint4*>(down_matrix(a, routed, slot));
    uint4 w[kRows][kLoads];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        // A row past the end reads the last one again (its sum is not stored).
        const uint4* row = matrix + min(first_row + r, a.rows - 1) * chunks + p.first;
#pragma unroll
        for (int l = 0; l < kLoads; ++l) {
            if (lane + l * kWarpSize < p.count) w[r][l] = __ldcs(row + lane + l * kWarpSize);
        }
    }
    const float weight = routed ? __ldcg(a.weights + slot)
                         : a.shared_gate_logit != nullptr ? sigmoid(__ldcg(a.shared_gate_logit + token))
                                                          : 1.0f;
    const int64_t own_row = first_row + lane;
    const bool owner = warp == 0 && lane < kRows && own_row < a.rows;  // the lanes that add the rows to the stream
    const float ahead_weight = a.ahead.on() && owner ? __ldg(a.ahead.weight + own_row) : 0.0f;
    wait_for_inputs();  // the expert outputs are the first launch's
    // Every block of a one-wave launch is resident already: the next kernel (the next layer's
    // in-projection) may launch now, its blocks taking the room left and requesting their weights.
    // Measured on an H100: a Drama 3 frame 3.393-3.399 ms against 3.399-3.418 released at the end.
    if (one_wave) allow_next_kernel();
    const float* mid = routed ? a.routed_mid + slot * a.routed_chunks * 8 : a.shared_mid + token * a.shared_chunks * 8;
    const PlainInput input{reinterpret_cast<const float4*>(mid + p.first * 8)};
    float dot[kRows] = {};
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
        if (lane + l * kWarpSize < p.count) {
            float4 lo, hi;
            input.load(lane + l * kWarpSize, lo, hi);
#pragma unroll
            for (int r = 0; r < kRows; ++r) dot[r] = dot8(w[r][l], lo, hi, dot[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        const float sum = warp_sum(dot[r]);
        if (lane == 0) part_sums[warp][r] = weight * sum;
    }
    __syncthreads();
    allow_next_kernel();
    if (warp != 0) return;
    float sum = 0.0f;
    if (owner) {
        for (int w = 0; w < static_cast<int>(blockDim.x / kWarpSize); ++w) sum += part_sums[w][lane];
    }
    const float value = owner ? a.out[token * a.rows + own_row] + sum : 0.0f;
    if (owner) a.out[token * a.rows + own_row] = value;
    if (a.ahead.on()) write_norm_ahead(a.ahead, owner, own_row, value, ahead_weight);
}

// Launches the parts kernel; false where a token's parts would need more warps than its blocks have.
template <int kRows, int kLoads, int kMaxWarps, int kMinBlocks>
bool launch_down_parts(const ExpertDownArgs& a, int64_t tokens, cudaStream_t stream) {
    const int64_t parts = down_parts<kLoads>(a);
    if (parts > kMaxWarps) return false;
    const auto kernel = expert_down_parts_kernel<kRows, kLoads, kMaxWarps, kMinBlocks>;
    const int64_t row_blocks = (a.rows + kRows - 1) / kRows;
    const int threads = static_cast<int>(parts * kWarpSize);
    const bool one_wave = row_blocks * tokens <= resident_blocks(kernel, threads);
    launch_early(kernel, dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(tokens)),
                 dim3(static_cast<unsigned>(threads)), 0, stream, "expert_down_parts_kernel", a, one_wave);
    return true;
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
    // Rows of up to 64 groups (Qwen3.5-MoE's 64) from up to 9 sources (its 8 chosen and the shared
    // one): blocks of 8 rows, 2 loads a lane of each, 2 blocks an SM (96 registers), so that
    // Qwen3.5-MoE's 2048 rows are one wave. Measured on an H100 against tiles of 8 rows (a warp a row
    // over every source, its inputs staged in shared memory): a Drama 3 frame 3.393-3.399 ms against
    // 3.444-3.459; with the next kernel released only at the end, 8 rows a block 3.399-3.418, 4 rows
    // at 3 an SM 3.412-3.417, 16 rows at 1 an SM 3.422-3.425.
    if (a.routed_chunks <= 64 && a.shared_chunks <= 64 && launch_down_parts<8, 2, 9, 2>(a, tokens, stream)) return;
    // Rows of 128 or more groups from up to 8 parts (Nemotron-H's six chosen rows of 232 groups and
    // the shared expert's 464 in two): 8 loads a lane, blocks of 2 rows at 2 an SM (118 registers).
    // Measured on an H100 against the kernel below: a Nemotron-H token 2.767-2.770 ms against
    // 2.829-2.840; 1 row a block at 4 an SM 2.770-2.774, 3 rows at 2 an SM 2.774-2.786, 4 rows at 1
    // an SM 2.804-2.806, 2 rows at 3 an SM (80 registers, some spilled) 2.810-2.812.
    if (row_lanes(a.routed_chunks) == 32 && launch_down_parts<2, 8, 8, 2>(a, tokens, stream)) return;
    switch (row_lanes(a.routed_chunks)) {
        // Rows of 128 or more groups: 8 loads a lane read up to 256 groups at once. Shorter rows take
        // three sources at a time. A row's sources are shared out over the block's warps (4 were
        // measured faster than 2, 7 or 8 for Nemotron-H's 7, before the parts kernel took them).
        case 32: launch_down<32, 8, 1, 4, 6>(a, tokens, stream); break;
        case 16: launch_down<16, 4, 3, 3, 8>(a, tokens, stream); break;
        default: launch_down<8, 4, 3, 3, 8>(a, tokens, stream); break;
    }
}

}  // namespace duet::cuda
