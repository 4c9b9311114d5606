#include "kernels/cpu/moe.h"

#include <algorithm>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_dispatch.h"
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
    std::vector<ExpertChoice> choices(static_cast<size_t>(n * routing.top_k));
    for (int64_t t = 0; t < n; ++t) {
        route_sigmoid_topk(logits.data() + t * experts, w.score_bias, experts, routing,
                           choices.data() + t * routing.top_k);
    }

    // Experts in index order, each over the rows it serves; then the shared expert.
    std::fill(out, out + n * hidden, 0.0f);
    std::vector<float> mid, result;
    run_routed_experts(
        x, hidden, group_tokens_by_expert(choices, n, routing.top_k, experts),
        [&](int64_t e, const float* rows, int64_t m, float* expert_out) {
            mid.resize(static_cast<size_t>(m * w.up[e].rows));
            relu2_mlp(rows, m, w.up[e], w.down[e], mid.data(), expert_out, pool);
        },
        out);
    mid.resize(static_cast<size_t>(n * w.shared_up.rows));
    result.resize(static_cast<size_t>(n * hidden));
    relu2_mlp(x, n, w.shared_up, w.shared_down, mid.data(), result.data(), pool);
    for (int64_t i = 0; i < n * hidden; ++i) out[i] += result[i];
}

}  // namespace duet::cpu
