#include "kernels/cpu/moe_dispatch.h"

#include <algorithm>

#include "kernels/cpu/matmul.h"

namespace duet::cpu {

std::vector<std::vector<ExpertAssignment>> group_tokens_by_expert(const std::vector<ExpertChoice>& choices,
                                                                  int64_t n, int64_t top_k, int64_t experts) {
    std::vector<std::vector<ExpertAssignment>> served(static_cast<size_t>(experts));
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t i = 0; i < top_k; ++i) {
            const ExpertChoice& c = choices[t * top_k + i];
            served[c.expert].push_back({t, c.weight});
        }
    }
    return served;
}

void run_routed_experts(const float* x, int64_t hidden, const std::vector<std::vector<ExpertAssignment>>& served,
                        const ExpertFn& expert, float* out) {
    std::vector<float> rows, result;
    for (int64_t e = 0; e < static_cast<int64_t>(served.size()); ++e) {
        const auto& list = served[e];
        if (list.empty()) continue;
        const int64_t m = static_cast<int64_t>(list.size());
        rows.resize(static_cast<size_t>(m * hidden));
        for (int64_t i = 0; i < m; ++i) {
            std::copy(x + list[i].token * hidden, x + (list[i].token + 1) * hidden, rows.begin() + i * hidden);
        }
        result.resize(static_cast<size_t>(m * hidden));
        expert(e, rows.data(), m, result.data());
        for (int64_t i = 0; i < m; ++i) {
            axpy_f32(list[i].weight, result.data() + i * hidden, out + list[i].token * hidden, hidden);
        }
    }
}

}  // namespace duet::cpu
