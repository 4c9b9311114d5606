// Expert routing, one block per token, with the CPU's exact rules (see kernels/cpu/moe_routing.h):
// the same scores, the same ties to the lower index, the same normalisation. The top-k ranks every
// expert against the others in one pass.
#include <cooperative_groups.h>

#include <climits>

#include "kernels/cuda/alignment.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/norm_ahead.cuh"
#include "kernels/cuda/occupancy.h"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kMaxExperts = 1024;
constexpr int kMaxGroups = 64;
constexpr int kMaxTopK = 64;
constexpr int kThreads = 256;
// Widest x the one-launch gate normalises in shared memory (with the routing's arrays, under 48 KiB).
constexpr int64_t kMaxGateHidden = 6144;

// The better of two (value, index) candidates: the larger value, on ties the lower index; index -1
// is no candidate.
__device__ __forceinline__ void keep_better(float& value, int& index, float other_value, int other_index) {
    if (other_index < 0) return;
    if (index < 0 || other_value > value || (other_value == value && other_index < index)) {
        value = other_value;
        index = other_index;
    }
}

// The key an entry is ranked by: its value, NaN as the worst (so the ranks stay a permutation).
__device__ __forceinline__ float rank_key(float value) { return isnan(value) ? -INFINITY : value; }

// Whether (u, j) ranks before (v, e): the larger key, on ties the lower index (keep_better's order).
__device__ __forceinline__ bool ranks_before(float u, int j, float v, int e) { return u > v || (u == v && j < e); }

// Sorts a warp's 32 entries (a key and an index a lane) best first, in ranks_before's order, by
// shuffles: a bitonic network of 15 steps. Lane r ends with the entry of rank r.
__device__ __forceinline__ void warp_sort_best_first(float& key, int& index) {
    const int lane = threadIdx.x % kWarpSize;
#pragma unroll
    for (int size = 2; size <= kWarpSize; size *= 2) {
#pragma unroll
        for (int stride = size / 2; stride > 0; stride /= 2) {
            const float other_key = __shfl_xor_sync(0xFFFFFFFFu, key, stride);
            const int other_index = __shfl_xor_sync(0xFFFFFFFFu, index, stride);
            // Blocks of `size` lanes alternate direction; the lower lane of a pair keeps the better
            // entry in a block sorted best first.
            const bool best_first = (lane & size) == 0 || size == kWarpSize;
            const bool lower = (lane & stride) == 0;
            if (ranks_before(other_key, other_index, key, index) == (lower == best_first)) {
                key = other_key;
                index = other_index;
            }
        }
    }
}

// block_top_indices for any count and k: each thread ranks its own entries against all the others
// (rank: how many are better, that is larger or equal with a lower index, keep_better's order) and
// the entry of rank r < k is order[r].
__device__ void block_top_indices_by_ranks(const float* values, int count, int k, bool* taken, int32_t* order) {
    __syncthreads();
    for (int e = threadIdx.x; e < count; e += blockDim.x) {
        const float v = rank_key(values[e]);
        int rank = 0;
#pragma unroll 8
        for (int j = 0; j < count; ++j) {
            rank += ranks_before(rank_key(values[j]), j, v, e) ? 1 : 0;
        }
        if (rank < k) {
            order[rank] = e;
            taken[e] = true;
        }
    }
    __syncthreads();
}

// The k best of values[0..count) (k at most count), best first, into order[0..k), marked in `taken`;
// every thread of a block of kThreads calls it, `values` ready before, `order` and `taken` for every
// thread after. Where each thread holds one entry and k fits a warp (the models' routers), each warp
// sorts its 32 entries by shuffles (a bitonic network of 15 steps), the warps' k best go to shared
// memory, and each of those is ranked against the others there: a few hundred instructions a warp,
// where ranking every entry against every other takes count of them per entry. The router's last
// block shares its SM with the experts' launch, which leaves it a fraction of the issue slots, so
// instructions are what this costs.
__device__ void block_top_indices(const float* values, int count, int k, bool* taken, int32_t* order) {
    constexpr int kWarps = kThreads / kWarpSize;
    if (count > kThreads || k > kWarpSize) {
        block_top_indices_by_ranks(values, count, k, taken, order);
        return;
    }
    __shared__ float pick_key[kWarps * kWarpSize];
    __shared__ int32_t pick_index[kWarps * kWarpSize];
    __syncthreads();
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    // Entries past the end rank after every real one: the worst key and an index above them all.
    float key = threadIdx.x < count ? rank_key(values[threadIdx.x]) : -INFINITY;
    int index = threadIdx.x;
    warp_sort_best_first(key, index);
    if (lane < k) {
        pick_key[warp * k + lane] = key;
        pick_index[warp * k + lane] = index;
    }
    __syncthreads();
    // Candidate c by the `lanes` consecutive threads from c · lanes, each counting the picks better
    // than it over a stride of them.
    const int picks = kWarps * k;
    const int lanes = picks <= kThreads / 4 ? 4 : picks <= kThreads / 2 ? 2 : 1;
    const int c = threadIdx.x / lanes, part = threadIdx.x % lanes;
    int rank = 0;
    const bool real = c < picks && pick_index[c] < count;
    if (c < picks) {
        const float v = pick_key[c];
        const int e = pick_index[c];
        for (int d = part; d < picks; d += lanes) rank += ranks_before(pick_key[d], pick_index[d], v, e) ? 1 : 0;
    }
    for (int offset = 1; offset < lanes; offset *= 2) rank += __shfl_xor_sync(0xFFFFFFFFu, rank, offset);
    if (real && part == 0 && rank < k) {
        order[rank] = pick_index[c];
        taken[pick_index[c]] = true;
    }
    __syncthreads();
}

// Experts a thread of the block scores: e = threadIdx.x + j · kThreads for j < kExpertsPerThread.
constexpr int kExpertsPerThread = kMaxExperts / kThreads;

// The score bias of the routing, as the thread's experts need it: bias(j) for its j-th expert. Read
// from memory where it is used (the routing launch), or into registers before the gate's wait (its
// load would otherwise be one more trip to memory inside the routing).
struct ThreadBias {
    float value[kExpertsPerThread] = {};
    __device__ void load(const float* bias, int experts) {
#pragma unroll
        for (int j = 0; j < kExpertsPerThread; ++j) {
            const int e = threadIdx.x + j * kThreads;
            if (bias != nullptr && e < experts) value[j] = bias[e];
        }
    }
};

// The chosen slots' matrices as a gate writes them (SlotMatrices), from the experts' table entries
// its block holds in shared memory; off where `first` is null.
struct SlotWrites {
    const void* const* first_of = nullptr;   // [experts], shared memory
    const void* const* second_of = nullptr;  // [experts], shared memory
    const void* const* down_of = nullptr;    // [experts], shared memory
    const void** first = nullptr;
    const void** second = nullptr;  // or null
    const void** down = nullptr;    // or null
    __device__ __forceinline__ void write(int slot, int expert) const {
        if (first == nullptr) return;
        first[slot] = first_of[expert];
        if (second != nullptr) second[slot] = second_of[expert];
        if (down != nullptr) down[slot] = down_of[expert];
    }
};

// A chosen expert's weight under sigmoid routing: its score, over the chosen's summed scores where
// the routing normalises, times the routing's scale.
__device__ __forceinline__ float sigmoid_route_weight(float score, float chosen_sum, const MoeRouting& routing) {
    const float denominator = routing.normalize ? chosen_sum + 1e-20f : 1.0f;
    return score / denominator * routing.scale;
}

// A chosen expert's share under softmax routing normalised over the chosen, before its division by
// the chosen's sum: p_i / Σ p_chosen = exp(l_i − l_best) / Σ exp(l_j − l_best), so the softmax's
// maximum and sum over every expert (two block reductions on the routing's critical path) are not
// needed, and the logits rank as their probabilities do (but for logits too close for their
// probabilities to differ, where the CPU takes the lower index).
__device__ __forceinline__ float chosen_softmax_part(float logit, float best_logit) { return expf(logit - best_logit); }

// One token's sigmoid routing by the whole block of kThreads: `logits` [experts] (any memory the
// block may read), `chosen` and `weights` [top_k].
__device__ void route_sigmoid_token(const float* logits, const ThreadBias& bias, int experts,
                                    const MoeRouting& routing, int32_t* chosen, float* weights,
                                    const SlotWrites& slots = {}) {
    __shared__ float score[kMaxExperts], choice[kMaxExperts];
    __shared__ bool taken[kMaxExperts];
    __shared__ float group_score[kMaxGroups];
    __shared__ int32_t order[kMaxTopK > kMaxGroups ? kMaxTopK : kMaxGroups];
#pragma unroll
    for (int j = 0; j < kExpertsPerThread; ++j) {
        const int e = threadIdx.x + j * kThreads;
        if (e >= experts) break;
        score[e] = sigmoid(logits[e]);
        choice[e] = score[e] + bias.value[j];
        taken[e] = false;
    }
    __syncthreads();
    const int groups = static_cast<int>(routing.groups);
    if (groups > 1) {
        const int per_group = experts / groups;
        // Each group's score: the sum of its best two (or fewer) choices, found by one thread.
        for (int g = threadIdx.x; g < groups; g += blockDim.x) {
            const float* members = choice + g * per_group;
            int first = -1, second = -1;
            float first_value = 0.0f, second_value = 0.0f;
            for (int i = 0; i < per_group; ++i) keep_better(first_value, first, members[i], i);
            for (int i = 0; i < per_group; ++i) {
                if (i != first) keep_better(second_value, second, members[i], i);
            }
            group_score[g] = (first >= 0 ? first_value : 0.0f) + (second >= 0 && per_group >= 2 ? second_value : 0.0f);
        }
        __syncthreads();
        __shared__ bool group_taken[kMaxGroups];
        for (int g = threadIdx.x; g < groups; g += blockDim.x) group_taken[g] = false;
        __syncthreads();
        block_top_indices(group_score, groups, static_cast<int>(routing.groups_kept), group_taken, order);
        for (int e = threadIdx.x; e < experts; e += blockDim.x) {
            if (!group_taken[e / per_group]) choice[e] = 0.0f;
        }
        __syncthreads();
    }
    const int k = static_cast<int>(routing.top_k);
    block_top_indices(choice, experts, k, taken, order);
    if (threadIdx.x < kWarpSize) {
        float sum = 0.0f;
        for (int i = threadIdx.x; i < k; i += kWarpSize) sum += score[order[i]];
        const float chosen_sum = routing.normalize ? warp_sum(sum) : 0.0f;
        for (int i = threadIdx.x; i < k; i += kWarpSize) {
            chosen[i] = order[i];
            weights[i] = sigmoid_route_weight(score[order[i]], chosen_sum, routing);
            slots.write(i, order[i]);
        }
    }
}

__global__ void route_sigmoid_kernel(const float* logits, const float* bias, int experts, MoeRouting routing,
                                     int32_t* chosen, float* weights) {
    ThreadBias thread_bias;
    thread_bias.load(bias, experts);
    wait_for_inputs();
    const int64_t t = blockIdx.x, k = routing.top_k;
    route_sigmoid_token(logits + t * experts, thread_bias, experts, routing, chosen + t * k, weights + t * k);
}

// One token's softmax routing by the whole block, as route_sigmoid_token.
__device__ void route_softmax_token(const float* logits, int experts, int top_k, bool normalize, int32_t* chosen,
                                    float* weights, const SlotWrites& slots = {}) {
    __shared__ float p[kMaxExperts];
    __shared__ bool taken[kMaxExperts];
    __shared__ float shared[32];
    __shared__ int32_t order[kMaxTopK];
    if (normalize) {
        // Weighed over the chosen alone (chosen_softmax_part): the logits rank the experts.
        for (int e = threadIdx.x; e < experts; e += blockDim.x) {
            p[e] = logits[e];
            taken[e] = false;
        }
        __syncthreads();
        block_top_indices(p, experts, top_k, taken, order);
        if (threadIdx.x < kWarpSize) {
            const float best = p[order[0]];
            float part[kMaxTopK / kWarpSize];
            float sum = 0.0f;
#pragma unroll
            for (int r = 0; r < kMaxTopK / kWarpSize; ++r) {
                const int i = threadIdx.x + r * kWarpSize;
                part[r] = i < top_k ? chosen_softmax_part(p[order[i]], best) : 0.0f;
                sum += part[r];
            }
            sum = warp_sum(sum);
#pragma unroll
            for (int r = 0; r < kMaxTopK / kWarpSize; ++r) {
                const int i = threadIdx.x + r * kWarpSize;
                if (i < top_k) {
                    chosen[i] = order[i];
                    weights[i] = part[r] / sum;
                    slots.write(i, order[i]);
                }
            }
        }
        return;
    }
    float best = -INFINITY;
    for (int e = threadIdx.x; e < experts; e += blockDim.x) {
        p[e] = logits[e];
        taken[e] = false;
        best = fmaxf(best, p[e]);
    }
    best = block_max(best, shared);
    float sum = 0.0f;
    for (int e = threadIdx.x; e < experts; e += blockDim.x) sum += p[e] = expf(p[e] - best);
    sum = block_sum(sum, shared);
    for (int e = threadIdx.x; e < experts; e += blockDim.x) p[e] /= sum;
    __syncthreads();
    block_top_indices(p, experts, top_k, taken, order);
    if (threadIdx.x < kWarpSize) {
        float chosen_sum = 0.0f;
        for (int i = threadIdx.x; i < top_k; i += kWarpSize) chosen_sum += p[order[i]];
        chosen_sum = warp_sum(chosen_sum);
        for (int i = threadIdx.x; i < top_k; i += kWarpSize) {
            chosen[i] = order[i];
            weights[i] = normalize ? p[order[i]] / chosen_sum : p[order[i]];
            slots.write(i, order[i]);
        }
    }
}

__global__ void route_softmax_kernel(const float* logits, int experts, int top_k, bool normalize, int32_t* chosen,
                                     float* weights) {
    wait_for_inputs();
    const int64_t t = blockIdx.x;
    route_softmax_token(logits + t * experts, experts, top_k, normalize, chosen + t * top_k, weights + t * top_k);
}

constexpr int kGateWarps = kThreads / kWarpSize;
constexpr int kGateChunksPerThread = static_cast<int>(kMaxGateHidden / 8 / kThreads);

// The gate of one cluster: kGateClusterBlocks blocks (a non-portable cluster size, which Hopper
// allows) hold every router row, each finds its own rows' k best, sends them to block 0's shared
// memory and block 0 merges them after the cluster's barrier. This replaces the last-block pattern's
// device-wide count and the reload of every logit from L2. A block's rows are one per lane of a
// warp, its candidates at most kGateClusterTopK, and block 0 merges them a warp at a time. The
// shared expert's gate row, when there is one, is split over the last block's warps (SplitGateRow),
// so that Qwen3.5-MoE's 256 experts are two rows a warp rather than three.
constexpr int kGateClusterBlocks = 16;
constexpr int kGateClusterRowsPerWarp = 2;  // a block's expert rows at most kGateWarps · this
constexpr int kGateClusterTopK = 8;
constexpr int64_t kGateClusterMaxExperts = int64_t(kGateClusterBlocks) * kGateWarps * kGateClusterRowsPerWarp;
static_assert(kGateWarps * kGateClusterRowsPerWarp <= kWarpSize, "a block's rows are a warp's lanes");
static_assert((kGateClusterBlocks * kGateClusterTopK + kWarpSize - 1) / kWarpSize * kGateClusterTopK <= kWarpSize,
              "block 0's merging warps' picks fit one warp");

// Block 0's shared memory in the cluster gate: the blocks' candidates and, by expert, what the
// routing's result needs of them.
struct GateClusterCandidates {
    float key[kGateClusterBlocks * kGateClusterTopK];
    int32_t index[kGateClusterBlocks * kGateClusterTopK];
    float score[kGateClusterMaxExperts];
    const void* first_of[kGateClusterMaxExperts];
    const void* second_of[kGateClusterMaxExperts];
    const void* down_of[kGateClusterMaxExperts];
};

// What a cluster gate's lane knows of its block's row `lane` before the wait: the sigmoid routing's
// bias and the expert's matrices for the slot writes.
struct GateRowEntries {
    float bias = 0.0f;
    const void* first = nullptr;
    const void* second = nullptr;
    const void* down = nullptr;
    __device__ void load(const MoeGateArgs& a, int64_t expert, bool real, bool with_bias) {
        if (!real) return;
        if (with_bias && a.sigmoid && a.bias != nullptr) bias = a.bias[expert];
        const SlotMatrices& sm = a.slot_matrices;
        if (sm.first == nullptr) return;
        first = sm.first_table[expert];
        if (sm.second_table != nullptr) second = sm.second_table[expert];
        if (sm.down_table != nullptr) down = sm.down_table[expert];
    }
};

// The shared expert's gate row in the cluster form, split over a block's warps: warp w holds loads
// w, w + kGateWarps, ... of the kLoads a lane that one warp's RowDot<kWarpSize, kLoads> would hold
// (the row is one round of them), and the sum adds the lanes' parts in RowDot's order, so the logit
// has the same bits as the last-block form's.
template <int kLoads>
struct SplitGateRow {
    static constexpr int kParts = (kLoads + kGateWarps - 1) / kGateWarps;  // loads a warp
    uint4 w[kParts];

    __device__ static int load_of(int part) { return static_cast<int>(threadIdx.x) / kWarpSize + part * kGateWarps; }

    __device__ void start(const uint4* row, int64_t chunks) {
#pragma unroll
        for (int p = 0; p < kParts; ++p) {
            const int64_t k = threadIdx.x % kWarpSize + int64_t(load_of(p)) * kWarpSize;
            if (load_of(p) < kLoads && k < chunks) w[p] = __ldcs(row + k);
        }
    }
    // Each lane's part of each of its warp's loads into parts[load][lane].
    template <typename Input>
    __device__ void store_parts(const Input& input, int64_t chunks, float (*parts)[kWarpSize]) const {
        const int lane = threadIdx.x % kWarpSize;
#pragma unroll
        for (int p = 0; p < kParts; ++p) {
            if (load_of(p) >= kLoads) continue;
            const int64_t k = lane + int64_t(load_of(p)) * kWarpSize;
            float part = 0.0f;
            if (k < chunks) {
                float4 lo, hi;
                input.load(k, lo, hi);
                part = dot8(w[p], lo, hi, 0.0f);
            }
            parts[load_of(p)][lane] = part;
        }
    }
    // The row's sum for every lane of a warp, once every warp's parts are stored.
    __device__ static float sum(const float (*parts)[kWarpSize]) {
        float sum = 0.0f;
#pragma unroll
        for (int u = 0; u < kLoads; ++u) sum += parts[u][threadIdx.x % kWarpSize];
        return RowDot<kWarpSize, kLoads>::group_sum(sum);
    }
};

// The cluster gate's routing, after every warp's logits are in `row_logits` (the block's rows):
// warp 0 sorts the block's rows and sends its k best to block 0, and block 0 merges every block's
// (a warp sorts 32 of them, warp 0 the warps' k best) and writes the result as route_*_token does.
template <bool kSigmoid>
__device__ void route_across_cluster(const MoeGateArgs& a, int64_t first_row, int rows_per_block,
                                 const float* row_logits, const GateRowEntries& entries) {
    __shared__ GateClusterCandidates candidates;
    const cg::cluster_group cluster = cg::this_cluster();
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int k = static_cast<int>(a.routing.top_k);
    const int experts = static_cast<int>(a.experts);
    // Block 0's shared memory is written only once every block of the cluster has started (the
    // arrival at the kernel's start; long past by now).
    cluster.barrier_wait();
    if (warp == 0) {
        const int64_t expert = first_row + lane;
        const bool real = lane < rows_per_block && expert < a.experts;
        const float logit = real ? row_logits[lane] : 0.0f;
        // Softmax routing normalised over the chosen ranks and weighs by the logits themselves.
        const float score = kSigmoid ? sigmoid(logit) : logit;
        float key = real ? rank_key(kSigmoid ? score + entries.bias : logit) : -INFINITY;
        // Entries past the end rank after every real one: the worst key and an index above them all.
        int index = real ? static_cast<int>(expert) : experts + static_cast<int>(blockIdx.x) * kWarpSize + lane;
        GateClusterCandidates* target = cluster.map_shared_rank(&candidates, 0);
        if (real) {
            target->score[expert] = score;
            target->first_of[expert] = entries.first;
            target->second_of[expert] = entries.second;
            target->down_of[expert] = entries.down;
        }
        warp_sort_best_first(key, index);
        if (lane < k) {
            target->key[blockIdx.x * k + lane] = key;
            target->index[blockIdx.x * k + lane] = index;
        }
    }
    cluster.sync();
    if (cluster.block_rank() != 0) return;
    __shared__ float pick_key[kWarpSize];
    __shared__ int32_t pick_index[kWarpSize];
    const int count = static_cast<int>(gridDim.x) * k;
    const int merging_warps = (count + kWarpSize - 1) / kWarpSize;
    if (warp < merging_warps) {
        const int c = warp * kWarpSize + lane;
        float key = c < count ? candidates.key[c] : -INFINITY;
        int index = c < count ? candidates.index[c] : INT_MAX;
        warp_sort_best_first(key, index);
        if (lane < k) {
            pick_key[warp * k + lane] = key;
            pick_index[warp * k + lane] = index;
        }
    }
    __syncthreads();
    if (warp != 0) return;
    const int picks = merging_warps * k;
    float key = lane < picks ? pick_key[lane] : -INFINITY;
    int index = lane < picks ? pick_index[lane] : INT_MAX;
    warp_sort_best_first(key, index);
    const bool chosen = lane < k;
    const float score = chosen ? candidates.score[index] : 0.0f;
    float weight;
    if (kSigmoid) {
        weight = sigmoid_route_weight(score, a.routing.normalize ? warp_sum(score) : 0.0f, a.routing);
    } else {
        const float best = __shfl_sync(0xFFFFFFFFu, score, 0);  // by every lane: a shuffle needs them all
        const float part = chosen ? chosen_softmax_part(score, best) : 0.0f;
        weight = part / warp_sum(part);
    }
    if (chosen) {
        a.chosen[lane] = index;
        a.weights[lane] = weight;
        const SlotMatrices& sm = a.slot_matrices;
        const SlotWrites slots{candidates.first_of, candidates.second_of, candidates.down_of,
                               sm.first, sm.second, sm.down};
        slots.write(lane, index);
    }
}

// A decode token's gate of a mixture-of-experts layer in one launch: every block normalises x into
// shared memory (block 0 also stores it for the experts), computes its warps' router rows (the
// optional extra row after the experts' is the shared expert's gate) and the routing follows: by the
// last block to finish, or (kCluster) by the cluster's blocks and block 0 (route_across_cluster). A
// block's rows are `rows_per_block` from blockIdx.x times it, kRowsPerWarp a warp at most. Three
// dependent kernels of a few microseconds each become one. With kAhead the norm was prepared by the
// kernel that wrote x (norm_ahead.h): the rows read it in place, and block 0 scales it for the
// experts.
template <bool kSigmoid, int kLoads, bool kAhead, int kRowsPerWarp, bool kCluster>
__global__ void __launch_bounds__(kThreads) moe_gate_kernel(MoeGateArgs a, int rows_per_block) {
    extern __shared__ float4 normed[];
    __shared__ float reduce[32];
    __shared__ float row_logits[kGateWarps * kRowsPerWarp];  // the cluster form's routing reads them
    const int warp = threadIdx.x / kWarpSize;
    const int64_t chunks = a.hidden / 8;
    const int64_t first_row = int64_t(blockIdx.x) * rows_per_block;
    // The rows of whole warps: in the cluster form the experts' (the gate row is split), otherwise
    // the shared expert's gate row too.
    const int64_t rows = a.experts + (!kCluster && a.gate_row != nullptr ? 1 : 0);
    const bool splits_gate_row = kCluster && a.gate_row != nullptr && blockIdx.x == gridDim.x - 1;
    if constexpr (kCluster) __cluster_barrier_arrive_relaxed();  // started: route_across_cluster waits on it
    // The whole row in flight at once where kLoads allows, and the norm's weights: neither needs
    // anything from before.
    RowDot<kWarpSize, kLoads> dots[kRowsPerWarp];
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
        const int local = warp + j * kGateWarps;
        const int64_t row = first_row + local;
        const bool active = local < rows_per_block && row < rows;
        const uint4* w = !active ? static_cast<const uint4*>(a.router)
                         : row < a.experts ? static_cast<const uint4*>(a.router) + row * chunks
                                           : static_cast<const uint4*>(a.gate_row);
        dots[j].start(w, active ? chunks : 0);
    }
    SplitGateRow<kLoads> split_gate_row;
    __shared__ float gate_row_parts[kCluster ? kLoads : 1][kWarpSize];
    if (splits_gate_row) split_gate_row.start(static_cast<const uint4*>(a.gate_row), chunks);
    // A thread's values: the two float4 of each of its 16-byte groups c = threadIdx.x + j · kThreads.
    const auto* g4 = reinterpret_cast<const float4*>(a.norm_weight);
    float4 g[2 * kGateChunksPerThread], v[2 * kGateChunksPerThread];
#pragma unroll
    for (int j = 0; j < kGateChunksPerThread; ++j) {
        const int64_t c = threadIdx.x + j * kThreads;
        if (!kAhead && c < chunks) {
            g[2 * j] = g4[2 * c];
            g[2 * j + 1] = g4[2 * c + 1];
        }
    }
    // The routing's inputs: in the cluster, warp 0's lanes hold their block's rows'; otherwise every
    // block's threads hold their expert's (threadIdx.x + j · kThreads), as none knows before its end
    // whether it will be the last.
    GateRowEntries entries;
    ThreadBias thread_bias;
    const SlotMatrices& sm = a.slot_matrices;
    if constexpr (kCluster) {
        const int64_t expert = first_row + threadIdx.x;
        entries.load(a, expert, warp == 0 && threadIdx.x < rows_per_block && expert < a.experts, true);
    } else {
        if (kSigmoid) thread_bias.load(a.bias, static_cast<int>(a.experts));
        entries.load(a, threadIdx.x, sm.first != nullptr && threadIdx.x < a.experts, false);
    }
    // The experts' launch may start now: its shared expert's blocks stream their weights while the
    // routing is found, and the rest wait for it.
    allow_next_kernel();
    wait_for_inputs();

    float logits[kRowsPerWarp];
    float row_scale = 1.0f;  // what a row's sum is multiplied by: 1 / rms where the norm came ahead
    if constexpr (kAhead) {
        const auto* weighted = reinterpret_cast<const float4*>(a.ahead.weighted);
        if (blockIdx.x == 0) {
            // The thread's values all in flight before the first store (which may alias them, as far
            // as the compiler knows), as the other branch reads x.
#pragma unroll
            for (int j = 0; j < 2 * kGateChunksPerThread; ++j) {
                const int64_t c = threadIdx.x + j / 2 * kThreads;
                if (c < chunks) v[j] = __ldg(weighted + 2 * c + j % 2);
            }
        }
        const float inv = norm_ahead_inv_rms(a.ahead, a.hidden, a.eps);
        if (blockIdx.x == 0) {
#pragma unroll
            for (int j = 0; j < 2 * kGateChunksPerThread; ++j) {
                const int64_t c = threadIdx.x + j / 2 * kThreads;
                if (c < chunks) {
                    reinterpret_cast<float4*>(a.normed)[2 * c + j % 2] =
                        make_float4(v[j].x * inv, v[j].y * inv, v[j].z * inv, v[j].w * inv);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < kRowsPerWarp; ++j) logits[j] = dots[j].finish(PlainInput{weighted}) * inv;
        if (splits_gate_row) split_gate_row.store_parts(PlainInput{weighted}, chunks, gate_row_parts);
        row_scale = inv;
    } else {
        // x read once into registers, normalised from there.
        const auto* x4 = reinterpret_cast<const float4*>(a.x);
        float squares = 0.0f;
#pragma unroll
        for (int j = 0; j < 2 * kGateChunksPerThread; ++j) {
            const int64_t c = threadIdx.x + j / 2 * kThreads;
            if (c < chunks) {
                v[j] = x4[2 * c + j % 2];
                squares += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
            }
        }
        const float inv = rsqrtf(block_sum(squares, reduce) / float(a.hidden) + a.eps);
#pragma unroll
        for (int j = 0; j < 2 * kGateChunksPerThread; ++j) {
            const int64_t c = threadIdx.x + j / 2 * kThreads;
            if (c < chunks) {
                const float4 n = make_float4(g[j].x * (v[j].x * inv), g[j].y * (v[j].y * inv),
                                             g[j].z * (v[j].z * inv), g[j].w * (v[j].w * inv));
                normed[(j % 2) * chunks + c] = n;
                if (blockIdx.x == 0) reinterpret_cast<float4*>(a.normed)[2 * c + j % 2] = n;
            }
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < kRowsPerWarp; ++j) logits[j] = dots[j].finish(SharedInput{normed, normed + chunks});
        if (splits_gate_row) split_gate_row.store_parts(SharedInput{normed, normed + chunks}, chunks, gate_row_parts);
    }
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
        const int local = warp + j * kGateWarps;
        const int64_t row = first_row + local;
        if (local < rows_per_block && row < rows && threadIdx.x % kWarpSize == 0) {
            if (row < a.experts) {
                a.logits[row] = logits[j];
                if (kCluster) row_logits[local] = logits[j];
            } else {
                *a.gate_logit = logits[j];
            }
        }
    }
    __syncthreads();
    if constexpr (kCluster) {
        if (splits_gate_row && warp == 0) {
            const float gate_logit = SplitGateRow<kLoads>::sum(gate_row_parts) * row_scale;
            if (threadIdx.x == 0) *a.gate_logit = gate_logit;
        }
        route_across_cluster<kSigmoid>(a, first_row, rows_per_block, row_logits, entries);
        return;
    }

    // The last block to finish sees every logit.
    __shared__ bool last;
    if (threadIdx.x == 0) last = count_block_last(a.blocks_done, gridDim.x);
    __syncthreads();
    if (!last) return;
    __shared__ float routed_logits[kMaxExperts];
    __shared__ const void* firsts[kThreads];
    __shared__ const void* seconds[kThreads];
    __shared__ const void* downs[kThreads];
    for (int e = threadIdx.x; e < a.experts; e += kThreads) routed_logits[e] = __ldcg(a.logits + e);
    if (sm.first != nullptr) {
        firsts[threadIdx.x] = entries.first;
        seconds[threadIdx.x] = entries.second;
        downs[threadIdx.x] = entries.down;
    }
    __syncthreads();
    const SlotWrites slots{firsts, seconds, downs, sm.first, sm.second, sm.down};
    if (kSigmoid) {
        route_sigmoid_token(routed_logits, thread_bias, static_cast<int>(a.experts), a.routing, a.chosen, a.weights,
                            slots);
    } else {
        route_softmax_token(routed_logits, static_cast<int>(a.experts), static_cast<int>(a.routing.top_k),
                            a.routing.normalize, a.chosen, a.weights, slots);
    }
    if (threadIdx.x == 0) *a.blocks_done = 0;  // ready for the next launch
}

}  // namespace

void route_sigmoid_topk(const float* logits, const float* bias, int64_t n, int64_t experts, const MoeRouting& routing,
                        int32_t* chosen, float* weights, cudaStream_t stream) {
    require(experts <= kMaxExperts && routing.groups <= kMaxGroups && routing.top_k <= kMaxTopK &&
                routing.groups_kept <= kMaxGroups,
            "moe routing: ", experts, " experts in ", routing.groups, " groups, top ", routing.top_k,
            " exceed the GPU router's ", kMaxExperts, ", ", kMaxGroups, " and ", kMaxTopK);
    if (n == 0) return;
    launch_early(route_sigmoid_kernel, dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, stream,
                 "route_sigmoid_kernel", logits, bias, static_cast<int>(experts), routing, chosen, weights);
}

void route_softmax_topk(const float* logits, int64_t n, int64_t experts, int64_t top_k, bool normalize,
                        int32_t* chosen, float* weights, cudaStream_t stream) {
    require(experts <= kMaxExperts && top_k <= kMaxTopK, "moe routing: ", experts, " experts, top ", top_k,
            " exceed the GPU router's ", kMaxExperts, " and ", kMaxTopK);
    if (n == 0) return;
    launch_early(route_softmax_kernel, dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, stream,
                 "route_softmax_kernel", logits, static_cast<int>(experts), static_cast<int>(top_k), normalize,
                 chosen, weights);
}

namespace {

using GateKernel = void (*)(MoeGateArgs, int);

template <int kLoads, int kRowsPerWarp, bool kCluster>
GateKernel gate_kernel(bool sigmoid, bool ahead) {
    return sigmoid ? (ahead ? moe_gate_kernel<true, kLoads, true, kRowsPerWarp, kCluster>
                            : moe_gate_kernel<true, kLoads, false, kRowsPerWarp, kCluster>)
                   : (ahead ? moe_gate_kernel<false, kLoads, true, kRowsPerWarp, kCluster>
                            : moe_gate_kernel<false, kLoads, false, kRowsPerWarp, kCluster>);
}

// The most loads a lane the gate's kernels hold: rows of more groups take more than one round.
constexpr int64_t kGateMaxLoads = 12;

template <int kRowsPerWarp, bool kCluster>
GateKernel gate_kernel(int64_t loads, bool sigmoid, bool ahead) {
    return loads <= 4   ? gate_kernel<4, kRowsPerWarp, kCluster>(sigmoid, ahead)
           : loads <= 8 ? gate_kernel<8, kRowsPerWarp, kCluster>(sigmoid, ahead)
                        : gate_kernel<kGateMaxLoads, kRowsPerWarp, kCluster>(sigmoid, ahead);
}

// The gate's rows (the router's and the shared expert's gate row), and the dynamic shared memory
// and loads a lane its launch takes.
int64_t gate_rows(const MoeGateArgs& a) { return a.experts + (a.gate_row != nullptr ? 1 : 0); }
size_t gate_shared_bytes(const MoeGateArgs& a) {
    return a.ahead.on() ? 0 : static_cast<size_t>(a.hidden) * sizeof(float);
}
// Enough for a whole router row (Nemotron-H's 336 groups, Qwen3.5's 256) in one round.
int64_t gate_loads(const MoeGateArgs& a) { return (a.hidden / 8 + kWarpSize - 1) / kWarpSize; }

// The experts' rows a block in the cluster form (the shared expert's gate row is split apart).
int gate_cluster_rows_per_block(const MoeGateArgs& a) {
    return static_cast<int>((a.experts + kGateClusterBlocks - 1) / kGateClusterBlocks);
}

// Whether a gate's routing is one route_across_cluster takes: no expert groups, weights from the
// chosen alone, few enough rows and choices; and rows of one round of loads (SplitGateRow).
bool gate_cluster_fits(const MoeGateArgs& a) {
    return a.routing.groups <= 1 && (a.sigmoid || a.routing.normalize) && a.routing.top_k <= kGateClusterTopK &&
           gate_loads(a) <= kGateMaxLoads &&
           a.experts <= kGateClusterMaxExperts && thread_block_clusters_available();
}

// The cluster form's kernel where the gate asks for it, its routing fits and the device places the
// cluster; null otherwise.
GateKernel gate_cluster_kernel(const MoeGateArgs& a) {
    if (!a.route_in_cluster || !gate_cluster_fits(a)) return nullptr;
    const int64_t loads = gate_loads(a);
    const GateKernel kernel = gate_cluster_rows_per_block(a) <= kGateWarps
                                  ? gate_kernel<1, true>(loads, a.sigmoid, a.ahead.on())
                                  : gate_kernel<kGateClusterRowsPerWarp, true>(loads, a.sigmoid, a.ahead.on());
    return resident_clusters(kernel, kGateClusterBlocks, kThreads, gate_shared_bytes(a)) > 0 ? kernel : nullptr;
}

}  // namespace

bool moe_gate_fits(int64_t hidden, int64_t experts, int64_t top_k) {
    return hidden % 8 == 0 && hidden <= kMaxGateHidden && experts <= kMaxExperts && top_k <= kMaxTopK &&
           top_k <= experts;
}

bool moe_gate_routes_in_cluster(const MoeGateArgs& a) { return gate_cluster_kernel(a) != nullptr; }

void moe_gate(const MoeGateArgs& a, cudaStream_t stream) {
    require(moe_gate_fits(a.hidden, a.experts, a.routing.top_k) && a.routing.groups <= kMaxGroups &&
                a.routing.groups_kept <= kMaxGroups,
            "moe_gate: ", a.experts, " experts of ", a.hidden, " values, top ", a.routing.top_k,
            " do not fit the one-launch gate");
    static_assert(kGateSlotMatricesMaxExperts <= kThreads, "a gate thread holds one expert's matrices");
    require(a.slot_matrices.first == nullptr || a.experts <= kGateSlotMatricesMaxExperts, "moe_gate: ", a.experts,
            " experts exceed the ", kGateSlotMatricesMaxExperts, " whose matrices the gate writes for its slots");
    const bool ahead = a.ahead.on();
    require(!ahead || aligned_16(a.ahead.weighted), "moe_gate: a norm prepared ahead must be 16-byte aligned");
    const size_t shared_bytes = gate_shared_bytes(a);
    if (const GateKernel kernel = gate_cluster_kernel(a)) {
        launch_early_in_clusters(kGateClusterBlocks, kernel, dim3(kGateClusterBlocks), dim3(kThreads), shared_bytes,
                                 stream, "moe_gate_kernel (cluster)", a, gate_cluster_rows_per_block(a));
        return;
    }
    const auto blocks = static_cast<unsigned>((gate_rows(a) + kGateWarps - 1) / kGateWarps);
    launch_early(gate_kernel<1, false>(gate_loads(a), a.sigmoid, ahead), dim3(blocks), dim3(kThreads), shared_bytes,
                 stream, "moe_gate_kernel", a, int(kGateWarps));
}

}  // namespace duet::cuda
