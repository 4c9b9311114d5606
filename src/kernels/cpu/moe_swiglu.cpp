#include "kernels/cpu/moe_swiglu.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_dispatch.h"
#include "kernels/cpu/moe_routing.h"

namespace duet::cpu {

void swiglu_mlp(const float* x, int64_t n, const MatrixView& gate, const MatrixView& up, const MatrixView& down,
                float* mid, float* out, ThreadPool* pool) {
    const int64_t count = n * gate.rows;
    float* gated = mid;
    float* upped = mid + count;
    matmul(gate, x, n, gated, pool);
    matmul(up, x, n, upped, pool);
    for (int64_t i = 0; i < count; ++i) gated[i] = silu(gated[i]) * upped[i];
    matmul(down, gated, n, out, pool);
}

void moe_swiglu(const float* x, int64_t n, const SwigluMoeWeights& w, int64_t top_k, bool normalize, float* out,
                ThreadPool* pool) {
    const int64_t experts = w.router.rows;
    const int64_t hidden = w.router.cols;
    require(top_k > 0 && top_k <= experts, "moe_swiglu: top_k ", top_k, " must be in [1, ", experts, "]");
    std::vector<float> logits(static_cast<size_t>(n * experts));
    matmul(w.router, x, n, logits.data(), pool);
    std::vector<ExpertChoice> choices(static_cast<size_t>(n * top_k));
    for (int64_t t = 0; t < n; ++t) {
        route_softmax_topk(logits.data() + t * experts, experts, top_k, normalize, choices.data() + t * top_k);
    }

    // Routed experts in index order, then the gated shared expert, as the reference sums them.
    std::fill(out, out + n * hidden, 0.0f);
    std::vector<float> mid;
    run_routed_experts(
        x, hidden, group_tokens_by_expert(choices, n, top_k, experts),
        [&](int64_t e, const float* rows, int64_t m, float* expert_out) {
            mid.resize(static_cast<size_t>(2 * m * w.gate[e].rows));
            swiglu_mlp(rows, m, w.gate[e], w.up[e], w.down[e], mid.data(), expert_out, pool);
        },
        out);

    mid.resize(static_cast<size_t>(2 * n * w.shared_gate.rows));
    std::vector<float> shared(static_cast<size_t>(n * hidden)), shared_gate(static_cast<size_t>(n));
    swiglu_mlp(x, n, w.shared_gate, w.shared_up, w.shared_down, mid.data(), shared.data(), pool);
    matmul(w.shared_expert_gate, x, n, shared_gate.data(), pool);
    for (int64_t t = 0; t < n; ++t) {
        const float g = sigmoid(shared_gate[t]);
        float* row = out + t * hidden;
        const float* s = shared.data() + t * hidden;
        for (int64_t i = 0; i < hidden; ++i) row[i] += g * s[i];
    }
}

}  // namespace duet::cpu
