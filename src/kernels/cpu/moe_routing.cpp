#include "kernels/cpu/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/activations.h"

namespace duet::cpu {

namespace {

// Indices of the k largest values, largest first, ties to the lower index.
std::vector<int32_t> top_indices(const std::vector<float>& values, int64_t k) {
    std::vector<int32_t> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return values[a] > values[b] || (values[a] == values[b] && a < b);
    });
    order.resize(static_cast<size_t>(k));
    return order;
}

}  // namespace

void route_sigmoid_topk(const float* logits, const float* bias, int64_t experts, const MoeRouting& routing,
                        ExpertChoice* out) {
    std::vector<float> score(static_cast<size_t>(experts));
    std::vector<float> choice(static_cast<size_t>(experts));
    for (int64_t e = 0; e < experts; ++e) {
        score[e] = sigmoid(logits[e]);
        choice[e] = score[e] + (bias != nullptr ? bias[e] : 0.0f);
    }
    if (routing.groups > 1) {
        // Keep the best groups; the others' experts take a choice score of 0, as the reference does.
        const int64_t per_group = experts / routing.groups;
        std::vector<float> group_score(static_cast<size_t>(routing.groups));
        for (int64_t g = 0; g < routing.groups; ++g) {
            std::vector<float> members(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
            std::vector<int32_t> best = top_indices(members, std::min<int64_t>(2, per_group));
            float sum = 0.0f;
            for (int32_t i : best) sum += members[i];
            group_score[g] = sum;
        }
        std::vector<int32_t> kept = top_indices(group_score, routing.groups_kept);
        std::vector<bool> keep(static_cast<size_t>(routing.groups), false);
        for (int32_t g : kept) keep[g] = true;
        for (int64_t e = 0; e < experts; ++e) {
            if (!keep[e / per_group]) choice[e] = 0.0f;
        }
    }
    std::vector<int32_t> chosen = top_indices(choice, routing.top_k);
    float sum = 0.0f;
    for (int32_t e : chosen) sum += score[e];
    const float denominator = routing.normalize ? sum + 1e-20f : 1.0f;
    for (int64_t i = 0; i < routing.top_k; ++i) {
        out[i] = {chosen[i], score[chosen[i]] / denominator * routing.scale};
    }
}

void route_softmax_topk(const float* logits, int64_t experts, int64_t top_k, bool normalize, ExpertChoice* out) {
    std::vector<float> p(logits, logits + experts);
    const float max_logit = *std::max_element(p.begin(), p.end());
    float sum = 0.0f;
    for (float& v : p) sum += v = std::exp(v - max_logit);
    for (float& v : p) v /= sum;
    std::vector<int32_t> chosen = top_indices(p, top_k);
    float chosen_sum = 0.0f;
    for (int32_t e : chosen) chosen_sum += p[e];
    for (int64_t i = 0; i < top_k; ++i) out[i] = {chosen[i], normalize ? p[chosen[i]] / chosen_sum : p[chosen[i]]};
}

}  // namespace duet::cpu
