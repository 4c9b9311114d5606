// Expert routing, one block per token, with the CPU's exact rules (see kernels/cpu/moe_routing.h):
// the same scores, the same ties to the lower index, the same normalisation. The top-k ranks every
// expert against the others in one pass.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

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

// The k best of values[0..count) (k at most count), best first, into order[0..k), marked in `taken`;
// every thread of the block calls it, `values` ready before, `order` and `taken` for every thread
// after. Each thread ranks its own entries against all the others (rank: how many are better, that
// is larger or equal with a lower index, keep_better's order) and the entry of rank r < k is
// order[r]: one pass over shared memory instead of k dependent rounds of arg-max.
__device__ void block_top_indices(const float* values, int count, int k, bool* taken, int32_t* order) {
    __syncthreads();
    for (int e = threadIdx.x; e < count; e += blockDim.x) {
        const float v = rank_key(values[e]);
        int rank = 0;
#pragma unroll 8
        for (int j = 0; j < count; ++j) {
            const float u = rank_key(values[j]);
            rank += (u > v || (u == v && j < e)) ? 1 : 0;
        }
        if (rank < k) {
            order[rank] = e;
            taken[e] = true;
        }
    }
    __syncthreads();
}

// One token's sigmoid routing by the whole block: `logits` [experts] (any memory the block may read),
// `chosen` and `weights` [top_k].
__device__ void route_sigmoid_token(const float* logits, const float* bias, int experts, const MoeRouting& routing,
                                    int32_t* chosen, float* weights) {
    __shared__ float score[kMaxExperts], choice[kMaxExperts];
    __shared__ bool taken[kMaxExperts];
    __shared__ float group_score[kMaxGroups];
    __shared__ int32_t order[kMaxTopK > kMaxGroups ? kMaxTopK : kMaxGroups];
    for (int e = threadIdx.x; e < experts; e += blockDim.x) {
        score[e] = sigmoid(logits[e]);
        choice[e] = score[e] + (bias != nullptr ? bias[e] : 0.0f);
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
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int i = 0; i < k; ++i) sum += score[order[i]];
        const float denominator = routing.normalize ? sum + 1e-20f : 1.0f;
        for (int i = 0; i < k; ++i) {
            chosen[i] = order[i];
            weights[i] = score[order[i]] / denominator * routing.scale;
        }
    }
}

__global__ void route_sigmoid_kernel(const float* logits, const float* bias, int experts, MoeRouting routing,
                                     int32_t* chosen, float* weights) {
    wait_for_inputs();
    const int64_t t = blockIdx.x, k = routing.top_k;
    route_sigmoid_token(logits + t * experts, bias, experts, routing, chosen + t * k, weights + t * k);
}

// One token's softmax routing by the whole block, as route_sigmoid_token.
__device__ void route_softmax_token(const float* logits, int experts, int top_k, bool normalize, int32_t* chosen,
                                    float* weights) {
    __shared__ float p[kMaxExperts];
    __shared__ bool taken[kMaxExperts];
    __shared__ float shared[32];
    __shared__ int32_t order[kMaxTopK];
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
    if (threadIdx.x == 0) {
        float chosen_sum = 0.0f;
        for (int i = 0; i < top_k; ++i) chosen_sum += p[order[i]];
        for (int i = 0; i < top_k; ++i) {
            chosen[i] = order[i];
            weights[i] = normalize ? p[order[i]] / chosen_sum : p[order[i]];
        }
    }
}

__global__ void route_softmax_kernel(const float* logits, int experts, int top_k, bool normalize, int32_t* chosen,
                                     float* weights) {
    wait_for_inputs();
    const int64_t t = blockIdx.x;
    route_softmax_token(logits + t * experts, experts, top_k, normalize, chosen + t * top_k, weights + t * top_k);
}

// The reads of x [hidden] normalised, from shared memory (see moe_gate_kernel).
struct SharedInput {
    const float4* x;
    __device__ __forceinline__ void load(int64_t k, float4& lo, float4& hi) const {
        lo = x[2 * k];
        hi = x[2 * k + 1];
    }
};

constexpr int kGateRowsPerBlock = kThreads / kWarpSize;

// A decode token's gate of a mixture-of-experts layer in one launch: every block normalises x into
// shared memory (block 0 also stores it for the experts), computes its warps' router rows (the
// optional extra row after the experts' is the shared expert's gate) and the last block to finish
// routes. Three dependent kernels of a few microseconds each become one.
template <bool kSigmoid>
__global__ void __launch_bounds__(kThreads) moe_gate_kernel(MoeGateArgs a) {
    extern __shared__ float4 normed[];
    __shared__ float reduce[32];
    __shared__ float routed_logits[kMaxExperts];
    __shared__ bool last;
    const int64_t chunks = a.hidden / 8;
    const int64_t row = int64_t(blockIdx.x) * kGateRowsPerBlock + threadIdx.x / kWarpSize;
    const int64_t rows = a.experts + (a.gate_row != nullptr ? 1 : 0);
    const bool active = row < rows;
    const uint4* w = row < a.experts ? static_cast<const uint4*>(a.router) + row * chunks
                                     : static_cast<const uint4*>(a.gate_row);
    RowDot<kWarpSize> dot;
    dot.start(active ? w : static_cast<const uint4*>(a.router), active ? chunks : 0);  // needs nothing from before
    // The experts' launch may start now: its shared expert's blocks stream their weights while the
    // routing is found, and the rest wait for it.
    allow_next_kernel();
    wait_for_inputs();

    const auto* x4 = reinterpret_cast<const float4*>(a.x);
    const auto* g4 = reinterpret_cast<const float4*>(a.norm_weight);
    const int quads = static_cast<int>(a.hidden / 4);
    float squares = 0.0f;
    for (int i = threadIdx.x; i < quads; i += kThreads) {
        const float4 v = x4[i];
        squares += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    const float inv = rsqrtf(block_sum(squares, reduce) / float(a.hidden) + a.eps);
    for (int i = threadIdx.x; i < quads; i += kThreads) {
        const float4 v = x4[i], g = g4[i];
        const float4 n = make_float4(g.x * (v.x * inv), g.y * (v.y * inv), g.z * (v.z * inv), g.w * (v.w * inv));
        normed[i] = n;
        if (blockIdx.x == 0) reinterpret_cast<float4*>(a.normed)[i] = n;
    }
    __syncthreads();
    const float logit = dot.finish(SharedInput{normed});
    if (active && threadIdx.x % kWarpSize == 0) {
        if (row < a.experts) {
            a.logits[row] = logit;
        } else {
            *a.gate_logit = logit;
        }
    }

    // The last block to finish sees every logit (the fence orders each block's stores before its count).
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(a.blocks_done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int e = threadIdx.x; e < a.experts; e += kThreads) routed_logits[e] = __ldcg(a.logits + e);
    __syncthreads();
    if (kSigmoid) {
        route_sigmoid_token(routed_logits, a.bias, static_cast<int>(a.experts), a.routing, a.chosen, a.weights);
    } else {
        route_softmax_token(routed_logits, static_cast<int>(a.experts), static_cast<int>(a.routing.top_k),
                            a.routing.normalize, a.chosen, a.weights);
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

bool moe_gate_fits(int64_t hidden, int64_t experts, int64_t top_k) {
    return hidden % 8 == 0 && hidden <= kMaxGateHidden && experts <= kMaxExperts && top_k <= kMaxTopK &&
           top_k <= experts;
}

void moe_gate(const MoeGateArgs& a, cudaStream_t stream) {
    require(moe_gate_fits(a.hidden, a.experts, a.routing.top_k) && a.routing.groups <= kMaxGroups &&
                a.routing.groups_kept <= kMaxGroups,
            "moe_gate: ", a.experts, " experts of ", a.hidden, " values, top ", a.routing.top_k,
            " do not fit the one-launch gate");
    const int64_t rows = a.experts + (a.gate_row != nullptr ? 1 : 0);
    const auto blocks = static_cast<unsigned>((rows + kGateRowsPerBlock - 1) / kGateRowsPerBlock);
    const size_t shared_bytes = static_cast<size_t>(a.hidden) * sizeof(float);
    launch_early(a.sigmoid ? moe_gate_kernel<true> : moe_gate_kernel<false>, dim3(blocks), dim3(kThreads),
                 shared_bytes, stream, "moe_gate_kernel", a);
}

}  // namespace duet::cuda
