// Causal attention of a few tokens over a key/value cache on the GPU (cuda::attention): splits of the
// visible keys in parallel, then a combine of their partial records.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/alignment.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/early_launch.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

// Causal attention over the cache as split-context work ("flash decoding"): block (token t, kv head,
// up to GMAX of the query heads it serves, split s) runs an online softmax over split s's keys and
// leaves the unnormalised sum of values with its running max and sum in a partial record, which
// attention_combine_kernel merges; where one split covers the context the block writes the output
// itself. The splits are laid at run time over the keys the position makes visible, so a launch
// recorded once serves every position up to the cache's capacity.
//
// The split's keys and values stream through shared memory in tiles of kAttentionWarps · KU rows
// (each padded to 32 · DPL floats), kAttentionStages - 1 tiles ahead of the one being worked
// (cp.async), each warp taking KU rows of a tile. A warp's lanes hold the dims lane, lane + 32, …
// (DPL of them) of the group's queries and of its running output, so each key and value row is
// read once for the whole group.
constexpr int kAttentionWarps = 4;
constexpr int kAttentionThreads = kAttentionWarps * kWarpSize;
constexpr int kAttentionStages = 4;
constexpr int64_t kSplitBytes = 32 * 1024;  // the least cache (keys and values) a split is given
constexpr int64_t kAttentionBlocks = 264;  // blocks to aim for: two per SM of an H100 / H200
constexpr int64_t kMaxSplits = 512;

// The fewest keys a split is given: a split's block streams its keys and values through one SM, so
// a split of too many bytes waits on that SM's share of the memory (64 KiB splits of 256-wide
// heads were slower than 32 KiB), while more splits than that cost more in the combine than they
// save.
__host__ __device__ constexpr int64_t fewest_keys_per_split(int64_t head_dim) {
    const int64_t keys = kSplitBytes / (2 * head_dim * int64_t(sizeof(float)));
    return keys > 8 ? keys : 8;
}

// How the visible keys fall into splits when the kernels run. A position read on the device is
// read before the kernel's wait (its latency was a tenth of a split's time after it): it is written
// by the host or by a kernel that finished before this launch began, never by the one before.
struct AttentionSpan {
    int64_t pos = 0;     // cache rows before the new tokens
    int64_t total = 0;   // keys the last token sees
    int64_t chunk = 0;   // keys per split
    int64_t active = 0;  // splits that hold keys
};

__device__ __forceinline__ AttentionSpan attention_span(const AttentionArgs& a, int64_t bound, int64_t splits) {
    AttentionSpan span;
    span.pos = a.position != nullptr ? int64_t(*a.position) : a.pos;
    span.total = min(span.pos + a.n, bound);
    span.chunk = max(fewest_keys_per_split(a.head_dim), (span.total + splits - 1) / splits);
    span.active = (span.total + span.chunk - 1) / span.chunk;
    return span;
}

// A tile's rows copied 4 bytes at a time, for head sizes or caches the 16-byte copies cannot take;
// kept out of line so the common path stays small.
__device__ __noinline__ void fetch_rows_narrow(float* stage, int row_floats, const float* keys, const float* values,
                                               int64_t j0, int64_t limit, int64_t kv_width, int hd, int tile_rows,
                                               int warp, int lane) {
    for (int rr = warp; rr < 2 * tile_rows; rr += kAttentionWarps) {
        const int r = rr % tile_rows;
        if (j0 + r >= limit) continue;
        const float* src = (rr < tile_rows ? keys : values) + (j0 + r) * kv_width;
        float* dst = stage + rr * row_floats;
        for (int c = lane; c < hd; c += kWarpSize) copy_async_4(dst + c, src + c);
    }
}

template <int KU>
__host__ __device__ constexpr int attention_tile() {
    return kAttentionWarps * KU;
}

// Shared memory of the stages, in floats: keys then values of every tile row, a row 32 · DPL floats
// (head_dim of them copied, the rest staying zero).
__host__ __device__ constexpr int attention_stage_floats(int tile, int dims_per_lane) {
    return kAttentionStages * 2 * tile * dims_per_lane * 32;
}

// Where head h of token t finds its output gate (null: no gate), and the gated value of its dim d.
__device__ __forceinline__ const float* output_gate_of(const AttentionArgs& a, int64_t t, int64_t h) {
    return a.output_gate != nullptr ? a.output_gate + t * a.gate_row_stride + h * a.gate_head_stride : nullptr;
}
__device__ __forceinline__ float gated(float value, const float* gate, int64_t d) {
    return gate != nullptr ? value * sigmoid(gate[d]) : value;
}

template <int DPL, int GMAX, int KU>
__global__ void __launch_bounds__(kAttentionThreads, 2)
    attention_split_kernel(AttentionArgs a, int64_t bound, int64_t splits, int64_t group_chunks, bool wide_copies,
                           float* partial) {
    constexpr int kTile = attention_tile<KU>();
    constexpr int kRow = DPL * kWarpSize;  // floats a row takes in shared memory
    constexpr int kStageFloats = 2 * kTile * kRow;
    extern __shared__ float4 stage_memory[];
    float* stages = reinterpret_cast<float*>(stage_memory);
    __shared__ float warp_best[kAttentionWarps][GMAX], warp_total[kAttentionWarps][GMAX];
    __shared__ float row_best[GMAX], row_total[GMAX];  // base-2 maximum and sum of each row
    unsigned block = blockIdx.x;
    const int64_t split = block % unsigned(splits);
    block /= unsigned(splits);
    const int64_t group_chunk = block % unsigned(group_chunks);
    block /= unsigned(group_chunks);
    const int64_t kvh = block % unsigned(a.kv_heads), t = block / unsigned(a.kv_heads);
    const AttentionSpan span = attention_span(a, bound, splits);
    if (split >= span.active) return;
    wait_for_inputs();  // launched early: before this only the position is read
    allow_next_kernel();
    const int64_t first = split * span.chunk;
    const int64_t limit = min(min(first + span.chunk, span.total), span.pos + t + 1);
    const int64_t group = a.heads / a.kv_heads, h0 = kvh * group + group_chunk * GMAX;
    const int rows = int(min(int64_t(GMAX), group - group_chunk * GMAX));
    const int hd = int(a.head_dim);
    const int64_t kv_width = a.kv_heads * hd;
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const float* keys = a.k_cache + kvh * hd;
    const float* values = a.v_cache + kvh * hd;
    const int64_t tiles = limit > first ? (limit - first + kTile - 1) / kTile : 0;

    // Rows of a stage that are never copied (past the visible keys) and dims past head_dim must read
    // finite values: they meet a zero weight or a zero query dim. Whole rows of head_dim are copied
    // by the wide path, so there only the value rows past the visible keys are zeroed as the last
    // tile is fetched; otherwise the stages are zeroed first.
    const bool zero_stages = !wide_copies || hd != kRow;

    // Tile `tile` of the split into its stage, each warp taking 2·KU of its key and value rows; key
    // rows past the visible keys are left as they are (never weighed). Every call commits a group,
    // empty or not.
    auto fetch = [&](int64_t tile) {
        if (tile < tiles) {
            float* stage = stages + int(tile % kAttentionStages) * kStageFloats;
            const int64_t j0 = first + tile * kTile;
            if (wide_copies) {
#pragma unroll
                for (int m = 0; m < 2 * KU; ++m) {
                    const int rr = warp + m * kAttentionWarps, r = rr % kTile;
                    if (j0 + r < limit) {
                        const float* src = (rr < kTile ? keys : values) + (j0 + r) * kv_width;
                        float* dst = stage + rr * kRow;
#pragma unroll
                        for (int x = 0; x < (DPL + 3) / 4; ++x) {
                            const int c = 4 * lane + x * 4 * kWarpSize;
                            if (c < hd) copy_async_16(dst + c, src + c);
                        }
                    } else if (rr >= kTile && !zero_stages) {
                        float* dst = stage + rr * kRow;
#pragma unroll
                        for (int x = 0; x < (DPL + 3) / 4; ++x) {
                            const int c = 4 * lane + x * 4 * kWarpSize;
                            if (c < hd) *reinterpret_cast<float4*>(dst + c) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                        }
                    }
                }
            } else {
                fetch_rows_narrow(stage, kRow, keys, values, j0, limit, kv_width, hd, kTile, warp, lane);
            }
        }
        copy_async_commit();
    };
    // Zeroing all the stages (64 KiB) took a microsecond, a tenth of the kernel, hence only when
    // the copies leave more than rows to zero.
    if (zero_stages) {
        for (int e = threadIdx.x; e < kAttentionStages * kStageFloats / 4; e += kAttentionThreads) {
            stage_memory[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        __syncthreads();
    }
#pragma unroll
    for (int s = 0; s < kAttentionStages - 1; ++s) fetch(s);

    // Lane L owns query row g = L >> kOwnerShift of the group for the softmax bookkeeping: the dot
    // products are reduced so that each lane ends with its own row's (a transposing reduction:
    // log2(GMAX) halving exchanges, then an ordinary one over the lanes left), the row's running
    // max and sum live in its lanes, and the lanes of row g hand the others its weights. Scores are
    // kept in base 2 (scale · log2 e) so each weight is one exp2.
    constexpr int kOwnerShift = GMAX == 1 ? 5 : GMAX == 2 ? 4 : GMAX == 4 ? 3 : 2;
    const int own = lane >> kOwnerShift;
    const float scale = a.scale * 1.44269504088896341f;
    float q[GMAX][DPL], acc[GMAX][DPL];
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
            const int d = lane + i * kWarpSize;
            q[g][i] = g < rows && d < hd ? a.q[(t * a.heads + h0 + g) * hd + d] : 0.0f;
            acc[g][i] = 0.0f;
        }
    }
    float best = -INFINITY, sum = 0.0f;  // of row `own`, over this warp's keys

    for (int64_t tile = 0; tile < tiles; ++tile) {
        copy_async_wait<kAttentionStages - 2>();
        __syncthreads();  // the tile is in for every thread, and every warp is done with the last one
        fetch(tile + kAttentionStages - 1);
        const float* k_tile = stages + int(tile % kAttentionStages) * kStageFloats + warp * KU * kRow;
        const float* v_tile = k_tile + kTile * kRow;
        const int64_t j0 = first + tile * kTile + warp * KU;
        if (j0 >= limit) continue;  // this warp's rows of the last tile are past the visible keys

        float score[KU];  // of row `own`
#pragma unroll
        for (int u = 0; u < KU; ++u) {
            const bool visible = j0 + u < limit;
            float k_row[DPL];
#pragma unroll
            for (int i = 0; i < DPL; ++i) k_row[i] = k_tile[u * kRow + lane + i * kWarpSize];
            float dot[GMAX];
#pragma unroll
            for (int g = 0; g < GMAX; ++g) {
                dot[g] = 0.0f;
#pragma unroll
                for (int i = 0; i < DPL; ++i) dot[g] = fmaf(q[g][i], k_row[i], dot[g]);
            }
            // Halving exchanges: at offset 16 >> step a lane keeps the half of its rows its lane bit
            // picks and adds the partner's values of that half.
#pragma unroll
            for (int step = 0; (GMAX >> step) > 1; ++step) {
                const int half = (GMAX >> step) / 2, offset = 16 >> step;
                const bool upper = (lane & offset) != 0;
#pragma unroll
                for (int k = 0; k < half; ++k) {
                    const float keep = upper ? dot[k + half] : dot[k];
                    const float give = upper ? dot[k] : dot[k + half];
                    dot[k] = keep + __shfl_xor_sync(0xFFFFFFFFu, give, offset);
                }
            }
#pragma unroll
            for (int offset = 16 >> (5 - kOwnerShift); offset > 0; offset /= 2) {
                dot[0] += __shfl_xor_sync(0xFFFFFFFFu, dot[0], offset);
            }
            score[u] = visible ? dot[0] * scale : -INFINITY;
        }
        // Key j0 is visible, so the new maximum is finite; the first time best is -inf and the
        // correction 0.
        float top = best;
#pragma unroll
        for (int u = 0; u < KU; ++u) top = fmaxf(top, score[u]);
        const float correction = exp2f(best - top);
        float p_sum = 0.0f;
#pragma unroll
        for (int u = 0; u < KU; ++u) {
            score[u] = exp2f(score[u] - top);
            p_sum += score[u];
        }
        sum = sum * correction + p_sum;
        best = top;
#pragma unroll
        for (int g = 0; g < GMAX; ++g) {
            const float c = __shfl_sync(0xFFFFFFFFu, correction, g << kOwnerShift);
            if (c != 1.0f) {  // the same in every lane: the row's maximum moved
#pragma unroll
                for (int i = 0; i < DPL; ++i) acc[g][i] *= c;
            }
        }
#pragma unroll
        for (int u = 0; u < KU; ++u) {
            float v_row[DPL];  // rows past the visible keys get weight 0
#pragma unroll
            for (int i = 0; i < DPL; ++i) v_row[i] = v_tile[u * kRow + lane + i * kWarpSize];
#pragma unroll
            for (int g = 0; g < GMAX; ++g) {
                const float p = __shfl_sync(0xFFFFFFFFu, score[u], g << kOwnerShift);
#pragma unroll
                for (int i = 0; i < DPL; ++i) acc[g][i] = fmaf(p, v_row[i], acc[g][i]);
            }
        }
    }
    copy_async_wait<0>();  // the trailing groups are empty; leave none behind

    // The warps' softmax states merged: maxima and sums first, then each warp's rescaled value sums
    // into the stages (free once every warp is past the loop) and added up in warp order, so the
    // result does not depend on timing. Two barriers: one a warp in turn cost a microsecond.
    if ((lane & ((1 << kOwnerShift) - 1)) == 0) {
        warp_best[warp][own] = best;
        warp_total[warp][own] = sum;
    }
    __syncthreads();
    if (threadIdx.x < rows) {
        const int g = threadIdx.x;
        float top = -INFINITY, total = 0.0f;
        for (int w = 0; w < kAttentionWarps; ++w) top = fmaxf(top, warp_best[w][g]);
        for (int w = 0; w < kAttentionWarps; ++w) {
            if (warp_best[w][g] != -INFINITY) total += warp_total[w][g] * exp2f(warp_best[w][g] - top);
        }
        row_best[g] = top;
        row_total[g] = total;
    }
    static_assert(kAttentionWarps * GMAX * kRow <= kAttentionStages * kStageFloats, "the merge fits the stages");
    float* scaled = stages;  // [warp][row][32 · DPL]
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
        if (g >= rows) break;
        float top = -INFINITY;
#pragma unroll
        for (int w = 0; w < kAttentionWarps; ++w) top = fmaxf(top, warp_best[w][g]);
        const float mine = warp_best[warp][g];
        const float weight = mine == -INFINITY ? 0.0f : exp2f(mine - top);
#pragma unroll
        for (int i = 0; i < DPL; ++i) scaled[(warp * GMAX + g) * kRow + lane + i * kWarpSize] = acc[g][i] * weight;
    }
    __syncthreads();
    auto merged = [&](int g, int d) {
        float value = 0.0f;
#pragma unroll
        for (int w = 0; w < kAttentionWarps; ++w) value += scaled[(w * GMAX + g) * kRow + d];
        return value;
    };

    if (splits == 1) {
        for (int e = threadIdx.x; e < rows * hd; e += kAttentionThreads) {
            const int g = e / hd, d = e % hd;
            a.out[(t * a.heads + h0 + g) * hd + d] = gated(merged(g, d) / row_total[g], output_gate_of(a, t, h0 + g), d);
        }
        return;
    }
    const int64_t record = hd + 2;
    for (int e = threadIdx.x; e < rows * hd; e += kAttentionThreads) {
        const int g = e / hd, d = e % hd;
        partial[((t * a.heads + h0 + g) * splits + split) * record + d] = merged(g, d);
    }
    if (threadIdx.x < rows) {
        const int g = threadIdx.x;
        float* stats = partial + ((t * a.heads + h0 + g) * splits + split) * record + hd;
        stats[0] = row_best[g];
        stats[1] = row_total[g];
    }
}

// Block (token and head, 32 output dims): the splits' partial records merged into the output,
// warp w taking splits w, w + kCombineWarps, … and the warps adding up in order. Each thread loads
// its first splits' values before the weights are known, so the records are read in about one
// round trip. Maxima are base 2.
constexpr int kCombineWarps = 8;
constexpr int kCombineInFlight = 8;  // splits a thread loads at once

__global__ void __launch_bounds__(kCombineWarps* kWarpSize)
    attention_combine_kernel(AttentionArgs a, int64_t bound, int64_t splits, const float* partial) {
    const AttentionSpan span = attention_span(a, bound, splits);
    wait_for_inputs();  // launched early: before this only the position is read
    allow_next_kernel();
    __shared__ float best[kMaxSplits], total[kMaxSplits];
    __shared__ float shared[32];
    __shared__ float sums[kCombineWarps][kWarpSize];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int64_t pieces = (a.head_dim + kWarpSize - 1) / kWarpSize;
    const int64_t row = blockIdx.x / pieces;  // t * heads + h
    const int64_t d = (blockIdx.x % pieces) * kWarpSize + lane;
    const int64_t hd = a.head_dim, record = hd + 2, active = span.active;
    const float* records = partial + row * splits * record;
    const bool owns_dim = d < hd;

    float value[kCombineInFlight];
#pragma unroll
    for (int u = 0; u < kCombineInFlight; ++u) {
        const int64_t s = warp + u * kCombineWarps;
        value[u] = owns_dim && s < active ? records[s * record + d] : 0.0f;
    }
    float top = -INFINITY;
    for (int64_t s = threadIdx.x; s < active; s += blockDim.x) {
        best[s] = records[s * record + hd];
        total[s] = records[s * record + hd + 1];
        top = fmaxf(top, best[s]);
    }
    top = block_max(top, shared);  // its barriers also publish best[] and total[]
    float sum = 0.0f;
    for (int64_t s = threadIdx.x; s < active; s += blockDim.x) {
        const float w = best[s] == -INFINITY ? 0.0f : exp2f(best[s] - top);
        sum += w * total[s];
    }
    const float all = block_sum(sum, shared);
    auto weight = [&](int64_t s) { return best[s] == -INFINITY ? 0.0f : exp2f(best[s] - top); };
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < kCombineInFlight; ++u) {
        const int64_t s = warp + u * kCombineWarps;
        if (s < active) acc = fmaf(weight(s), value[u], acc);
    }
    for (int64_t s0 = warp + kCombineInFlight * kCombineWarps; s0 < active; s0 += kCombineInFlight * kCombineWarps) {
#pragma unroll
        for (int u = 0; u < kCombineInFlight; ++u) {
            const int64_t s = s0 + u * kCombineWarps;
            value[u] = owns_dim && s < active ? records[s * record + d] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < kCombineInFlight; ++u) {
            const int64_t s = s0 + u * kCombineWarps;
            if (s < active) acc = fmaf(weight(s), value[u], acc);
        }
    }
    sums[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && owns_dim) {
        float out = 0.0f;
#pragma unroll
        for (int w = 0; w < kCombineWarps; ++w) out += sums[w][lane];
        a.out[row * hd + d] = gated(out / all, output_gate_of(a, row / a.heads, row % a.heads), d);
    }
}

// The launch shape of an attention call: fixed by the arguments and, when the position is read on
// the device, by the capacity rather than the position.
struct AttentionPlan {
    int dims_per_lane = 1;  // DPL: head_dim ≤ 32 · DPL
    int group_rows = 1;     // GMAX: query heads per block
    int64_t group_chunks = 1;
    int64_t bound = 0;  // the most keys a token can see
    int64_t splits = 1;
};

AttentionPlan plan_attention(const AttentionArgs& a) {
    require(a.kv_heads > 0 && a.heads % a.kv_heads == 0, "attention: ", a.heads, " heads do not share ",
            a.kv_heads, " kv heads evenly");
    require(a.head_dim >= 1 && a.head_dim <= 16 * kWarpSize, "attention: head_dim ", a.head_dim, " is outside 1..",
            16 * kWarpSize);
    require(a.position == nullptr || a.capacity > 0, "attention: a position read on the device needs the capacity");
    AttentionPlan p;
    while (p.dims_per_lane * kWarpSize < a.head_dim) p.dims_per_lane *= 2;
    const int64_t group = a.heads / a.kv_heads;
    const int most_rows = p.dims_per_lane >= 16 ? 4 : 8;
    while (p.group_rows < group && p.group_rows < most_rows) p.group_rows *= 2;
    p.group_chunks = (group + p.group_rows - 1) / p.group_rows;
    p.bound = a.position != nullptr ? a.capacity : a.pos + a.n;
    const int64_t units = a.n * a.kv_heads * p.group_chunks;
    const int64_t fewest_keys = fewest_keys_per_split(a.head_dim);
    const int64_t by_keys = (p.bound + fewest_keys - 1) / fewest_keys;
    const int64_t by_blocks = std::max<int64_t>(1, kAttentionBlocks / units);
    p.splits = std::clamp<int64_t>(std::min(by_keys, by_blocks), 1, kMaxSplits);
    return p;
}

template <int DPL, int GMAX>
void launch_attention_splits(const AttentionArgs& a, const AttentionPlan& p, float* partial, cudaStream_t stream) {
    constexpr int KU = DPL >= 16 ? 1 : DPL >= 8 ? 2 : 4;
    const auto kernel = attention_split_kernel<DPL, GMAX, KU>;
    constexpr size_t stage_bytes = attention_stage_floats(attention_tile<KU>(), DPL) * sizeof(float);
    // Over 48 KiB of dynamic shared memory must be asked for, once per kernel.
    static const bool opted_in = [&] {
        DUET_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(stage_bytes)));
        return true;
    }();
    (void)opted_in;
    const bool wide_copies = a.head_dim % 4 == 0 && aligned_16(a.k_cache) && aligned_16(a.v_cache);
    const int64_t blocks = p.splits * p.group_chunks * a.kv_heads * a.n;
    launch_early(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kAttentionThreads), stage_bytes, stream,
                 "attention_split_kernel", a, p.bound, p.splits, p.group_chunks, wide_copies, partial);
}

template <int DPL>
void launch_attention_rows(const AttentionArgs& a, const AttentionPlan& p, float* partial, cudaStream_t stream) {
    switch (p.group_rows) {
        case 1: return launch_attention_splits<DPL, 1>(a, p, partial, stream);
        case 2: return launch_attention_splits<DPL, 2>(a, p, partial, stream);
        case 4: return launch_attention_splits<DPL, 4>(a, p, partial, stream);
        default:
            if constexpr (DPL < 16) return launch_attention_splits<DPL, 8>(a, p, partial, stream);
    }
    fail("attention: no kernel for ", p.group_rows, " heads per block at ", DPL, " dims per lane");
}

}  // namespace

size_t attention_scratch_floats(const AttentionArgs& args) {
    if (args.n * args.heads == 0) return 0;
    const AttentionPlan p = plan_attention(args);
    return p.splits > 1 ? static_cast<size_t>(args.n * args.heads * p.splits * (args.head_dim + 2)) : 0;
}

void attention(const AttentionArgs& args, float* scratch, cudaStream_t stream) {
    if (args.n * args.heads == 0) return;
    const AttentionPlan p = plan_attention(args);
    require(p.splits == 1 || scratch != nullptr, "attention: ", p.splits, " splits need scratch");
    switch (p.dims_per_lane) {
        case 1: launch_attention_rows<1>(args, p, scratch, stream); break;
        case 2: launch_attention_rows<2>(args, p, scratch, stream); break;
        case 4: launch_attention_rows<4>(args, p, scratch, stream); break;
        case 8: launch_attention_rows<8>(args, p, scratch, stream); break;
        default: launch_attention_rows<16>(args, p, scratch, stream); break;
    }
    if (p.splits > 1) {
        const int64_t pieces = (args.head_dim + kWarpSize - 1) / kWarpSize;
        launch_early(attention_combine_kernel, dim3(static_cast<unsigned>(args.n * args.heads * pieces)),
                     dim3(kCombineWarps * kWarpSize), 0, stream, "attention_combine_kernel", args, p.bound, p.splits,
                     scratch);
    }
}

}  // namespace duet::cuda
