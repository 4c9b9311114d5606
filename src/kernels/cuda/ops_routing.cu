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

__global__ void route_sigmoid_kernel(const float* logits, const float* bias, int experts, MoeRouting routing,
                                     int32_t* chosen, float* weights) {
    __shared__ float score[kMaxExperts], choice[kMaxExperts];
    __shared__ bool taken[kMaxExperts];
    __shared__ float group_score[kMaxGroups];
    __shared__ int32_t order[kMaxTopK > kMaxGroups ? kMaxTopK : kMaxGroups];
    wait_for_inputs();
    const int64_t t = blockIdx.x;
    for (int e = threadIdx.x; e < experts; e += blockDim.x) {
        score[e] = sigmoid(logits[t * experts + e]);
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
            chosen[t * k + i] = order[i];
            weights[t * k + i] = score[order[i]] / denominator * routing.scale;
        }
    }
}

__global__ void route_softmax_kernel(const float* logits, int experts, int top_k, bool normalize, int32_t* chosen,
                                     float* weights) {
    __shared__ float p[kMaxExperts];
    __shared__ bool taken[kMaxExperts];
    __shared__ float shared[32];
    __shared__ int32_t order[kMaxTopK];
    wait_for_inputs();
    const int64_t t = blockIdx.x;
    float best = -INFINITY;
    for (int e = threadIdx.x; e < experts; e += blockDim.x) {
        p[e] = logits[t * experts + e];
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
            chosen[t * top_k + i] = order[i];
            weights[t * top_k + i] = normalize ? p[order[i]] / chosen_sum : p[order[i]];
        }
    }
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

}  // namespace duet::cuda
