#include "kernels/cpu/moe.h"

#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_routing.h"

namespace duet::cpu {

void relu2_mlp(const float* x, int64_t n, const MatrixView& up, const MatrixView& down, float* mid, float* out,
               ThreadPool* pool) {
    matmul(up, x, n, mid, pool);
    for (int64_t i = 0; i < n * up.rows; ++i) mid[i] = relu2(mid[i]);
    matmul(down, mid, n, out, pool);
}

void moe_relu2(const float* x, int64_t n, const MoeWeights& w, const MoeRouting& routing, float* out,
               ThreadPool* pool) {
    const int64_t experts = w.router.rows;
    const int64_t hidden = w.router.cols;
    std::vector<float> logits(static_cast<size_t>(n * experts));
    matmul(w.router, x, n, logits.data(), pool);

    // Which tokens each expert serves, with what weight.
    struct Assignment {
        int64_t token;
        float weight;
    };
    std::vector<std::vector<Assignment>> served(static_cast<size_t>(experts));
    std::vector<ExpertChoice> choices(static_cast<size_t>(routing.top_k));
    for (int64_t t = 0; t < n; ++t) {
        route_sigmoid_topk(logits.data() + t * experts, w.score_bias, experts, routing, choices.data());
        for (const ExpertChoice& c : choices) served[c.expert].push_back({t, c.weight});
    }

    // Experts in index order, each over the rows it serves; then the shared expert.
    std::fill(out, out + n * hidden, 0.0f);
    std::vector<float> rows, mid, result;
    for (int64_t e = 0; e < experts; ++e) {
        const auto& list = served[e];
        if (list.empty()) continue;
        const int64_t m = static_cast<int64_t>(list.size());
        rows.resize(static_cast<size_t>(m * hidden));
        for (int64_t i = 0; i < m; ++i) {
            std::copy(x + list[i].token * hidden, x + (list[i].token + 1) * hidden, rows.begin() + i * hidden);
        }
        mid.resize(static_cast<size_t>(m * w.up[e].rows));
        result.resize(static_cast<size_t>(m * hidden));
        relu2_mlp(rows.data(), m, w.up[e], w.down[e], mid.data(), result.data(), pool);
        for (int64_t i = 0; i < m; ++i) {
            axpy_f32(list[i].weight, result.data() + i * hidden, out + list[i].token * hidden, hidden);
        }
    }
    mid.resize(static_cast<size_t>(n * w.shared_up.rows));
    result.resize(static_cast<size_t>(n * hidden));
    relu2_mlp(x, n, w.shared_up, w.shared_down, mid.data(), result.data(), pool);
    for (int64_t i = 0; i < n * hidden; ++i) out[i] += result[i];
}

}  // namespace duet::cpu
