// Expert routing, one thread per token, with the CPU's exact rules (see kernels/cpu/moe_routing.h):
// the same scores, the same ties to the lower index, the same normalisation.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

constexpr int kMaxExperts = 1024;
constexpr int kMaxGroups = 64;

// Marks the k largest of values[0..count) (ties to the lower index) in `order`, best first.
__device__ void top_indices(const float* values, int count, int k, int32_t* order) {
    for (int i = 0; i < k; ++i) {
        int best = -1;
        for (int e = 0; e < count; ++e) {
            bool taken = false;
            for (int j = 0; j < i; ++j) taken = taken || order[j] == e;
            if (!taken && (best < 0 || values[e] > values[best])) best = e;
        }
        order[i] = best;
    }
}

__global__ void route_sigmoid_kernel(const float* logits, const float* bias, int64_t n, int experts,
                                     MoeRouting routing, int32_t* chosen, float* weights) {
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float score[kMaxExperts], choice[kMaxExperts];
    for (int e = 0; e < experts; ++e) {
        score[e] = sigmoid(logits[t * experts + e]);
        choice[e] = score[e] + (bias != nullptr ? bias[e] : 0.0f);
    }
    if (routing.groups > 1) {
        const int per_group = experts / static_cast<int>(routing.groups);
        float group_score[kMaxGroups];
        for (int g = 0; g < routing.groups; ++g) {
            int32_t best[2];
            const int take = per_group < 2 ? per_group : 2;
            top_indices(choice + g * per_group, per_group, take, best);
            group_score[g] = 0.0f;
            for (int i = 0; i < take; ++i) group_score[g] += choice[g * per_group + best[i]];
        }
        int32_t kept[kMaxGroups];
        top_indices(group_score, static_cast<int>(routing.groups), static_cast<int>(routing.groups_kept), kept);
        for (int e = 0; e < experts; ++e) {
            bool keep = false;
            for (int i = 0; i < routing.groups_kept; ++i) keep = keep || kept[i] == e / per_group;
            if (!keep) choice[e] = 0.0f;
        }
    }
    int32_t* mine = chosen + t * routing.top_k;
    top_indices(choice, experts, static_cast<int>(routing.top_k), mine);
    float sum = 0.0f;
    for (int i = 0; i < routing.top_k; ++i) sum += score[mine[i]];
    const float denominator = routing.normalize ? sum + 1e-20f : 1.0f;
    for (int i = 0; i < routing.top_k; ++i) weights[t * routing.top_k + i] = score[mine[i]] / denominator * routing.scale;
}

__global__ void route_softmax_kernel(const float* logits, int64_t n, int experts, int top_k, bool normalize,
                                     int32_t* chosen, float* weights) {
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float p[kMaxExperts];
    float best = -INFINITY;
    for (int e = 0; e < experts; ++e) {
        p[e] = logits[t * experts + e];
        best = fmaxf(best, p[e]);
    }
    float sum = 0.0f;
    for (int e = 0; e < experts; ++e) sum += p[e] = expf(p[e] - best);
    for (int e = 0; e < experts; ++e) p[e] /= sum;
    int32_t* mine = chosen + t * top_k;
    top_indices(p, experts, top_k, mine);
    float chosen_sum = 0.0f;
    for (int i = 0; i < top_k; ++i) chosen_sum += p[mine[i]];
    for (int i = 0; i < top_k; ++i) weights[t * top_k + i] = normalize ? p[mine[i]] / chosen_sum : p[mine[i]];
}

}  // namespace

void route_sigmoid_topk(const float* logits, const float* bias, int64_t n, int64_t experts, const MoeRouting& routing,
                        int32_t* chosen, float* weights, cudaStream_t stream) {
    require(experts <= kMaxExperts && routing.groups <= kMaxGroups, "moe routing: ", experts, " experts in ",
            routing.groups, " groups exceed the GPU router's ", kMaxExperts, " and ", kMaxGroups);
    if (n == 0) return;
    route_sigmoid_kernel<<<static_cast<unsigned>((n + 63) / 64), 64, 0, stream>>>(
        logits, bias, n, static_cast<int>(experts), routing, chosen, weights);
    DUET_CUDA_CHECK_LAUNCH("route_sigmoid_kernel");
}

void route_softmax_topk(const float* logits, int64_t n, int64_t experts, int64_t top_k, bool normalize,
                        int32_t* chosen, float* weights, cudaStream_t stream) {
    require(experts <= kMaxExperts, "moe routing: ", experts, " experts exceed the GPU router's ", kMaxExperts);
    if (n == 0) return;
    route_softmax_kernel<<<static_cast<unsigned>((n + 63) / 64), 64, 0, stream>>>(
        logits, n, static_cast<int>(experts), static_cast<int>(top_k), normalize, chosen, weights);
    DUET_CUDA_CHECK_LAUNCH("route_softmax_kernel");
}

}  // namespace duet::cuda
