#include "kernels/cpu/moe_swiglu.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_dispatch.h"
#include "kernels/cpu/moe_routing.h"

namespace duet::cpu {

namespace {

// gated[i] = silu(gated[i]) · up[i]
void silu_gate(float* gated, const float* up, int64_t count) {
    for (int64_t i = 0; i < count; ++i) gated[i] = silu(gated[i]) * up[i];
}

}  // namespace

// Three jobs on the pool, each a set of products run together: the router with the shared expert's
// first products and its gate (none needs the routing), every chosen expert's gate and up products
// with the shared expert's down, then every chosen expert's down. The sum is the reference's:
// routed experts in index order, then the gated shared expert.
void moe_swiglu(const float* x, int64_t n, const SwigluMoeWeights& w, int64_t top_k, bool normalize, float* out,
                ThreadPool* pool) {
    const int64_t experts = w.router.rows;
    const int64_t hidden = w.router.cols;
    require(top_k > 0 && top_k <= experts && !w.gate.empty(), "moe_swiglu: top_k ", top_k, " must be in [1, ",
            experts, "]");
    const int64_t inter = w.gate.front().rows;
    const int64_t shared_count = n * w.shared_gate.rows;
    ScratchCarver scratch(ScratchCarver::room(n * experts) + ScratchCarver::room(2 * shared_count) +
                          ScratchCarver::room(n * hidden) + ScratchCarver::room(n) +
                          expert_batch_floats(n, top_k, hidden, 2 * inter));
    float* logits = scratch.take(static_cast<size_t>(n * experts));
    float* shared_mid = scratch.take(static_cast<size_t>(2 * shared_count));
    float* shared = scratch.take(static_cast<size_t>(n * hidden));
    float* shared_gate = scratch.take(static_cast<size_t>(n));
    const Product unrouted[] = {{w.router, x, n, logits},
                                {w.shared_gate, x, n, shared_mid},
                                {w.shared_up, x, n, shared_mid + shared_count},
                                {w.shared_expert_gate, x, n, shared_gate}};
    matmul_many(unrouted, pool);
    silu_gate(shared_mid, shared_mid + shared_count, shared_count);

    std::vector<ExpertChoice> choices(static_cast<size_t>(n * top_k));
    for (int64_t t = 0; t < n; ++t) {
        route_softmax_topk(logits + t * experts, experts, top_k, normalize, choices.data() + t * top_k);
    }
    const std::vector<ExpertBatch> batches =
        gather_expert_batches(x, n, hidden, choices, top_k, experts, 2 * inter, scratch);

    std::vector<Product> products{{w.shared_down, shared_mid, n, shared}};
    for (const ExpertBatch& b : batches) {
        require(w.gate[b.expert].rows == inter && w.up[b.expert].rows == inter, "moe_swiglu: expert ", b.expert,
                " has ", w.gate[b.expert].rows, " and ", w.up[b.expert].rows, " middle rows, expert 0 ", inter);
        products.push_back({w.gate[b.expert], b.rows, b.m(), b.mid});
        products.push_back({w.up[b.expert], b.rows, b.m(), b.mid + b.m() * inter});
    }
    matmul_many(products, pool);
    products.clear();
    for (const ExpertBatch& b : batches) {
        silu_gate(b.mid, b.mid + b.m() * inter, b.m() * inter);
        products.push_back({w.down[b.expert], b.mid, b.m(), b.result});
    }
    matmul_many(products, pool);

    std::fill(out, out + n * hidden, 0.0f);
    add_expert_results(batches, hidden, out);
    for (int64_t t = 0; t < n; ++t) {
        const float g = sigmoid(shared_gate[t]);
        float* row = out + t * hidden;
        const float* s = shared + t * hidden;
        for (int64_t i = 0; i < hidden; ++i) row[i] += g * s[i];
    }
}

}  // namespace duet::cpu
