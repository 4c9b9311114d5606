#include "kernels/cpu/moe.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_dispatch.h"
#include "kernels/cpu/moe_routing.h"

namespace duet::cpu {

namespace {

void relu2_in_place(float* v, int64_t count) {
    for (int64_t i = 0; i < count; ++i) v[i] = relu2(v[i]);
}

}  // namespace

// Three jobs on the pool, each a set of products run together: the router with the shared expert's
// up product (neither needs the routing), every chosen expert's up product with the shared expert's
// down, then every chosen expert's down. The sum is the reference's: routed experts in index
// order, then the shared expert.
void moe_relu2(const float* x, int64_t n, const MoeWeights& w, const MoeRouting& routing, float* out,
               ThreadPool* pool) {
    const int64_t experts = w.router.rows;
    const int64_t hidden = w.router.cols;
    require(!w.up.empty(), "moe_relu2: no experts");
    const int64_t inter = w.up.front().rows;
    const int64_t shared_count = n * w.shared_up.rows;
    ScratchCarver scratch(ScratchCarver::room(n * experts) + ScratchCarver::room(shared_count) +
                          ScratchCarver::room(n * hidden) + expert_batch_floats(n, routing.top_k, hidden, inter));
    float* logits = scratch.take(static_cast<size_t>(n * experts));
    float* shared_mid = scratch.take(static_cast<size_t>(shared_count));
    float* shared = scratch.take(static_cast<size_t>(n * hidden));
    const Product unrouted[] = {{w.router, x, n, logits}, {w.shared_up, x, n, shared_mid}};
    matmul_many(unrouted, pool);
    relu2_in_place(shared_mid, shared_count);

    std::vector<ExpertChoice> choices(static_cast<size_t>(n * routing.top_k));
    for (int64_t t = 0; t < n; ++t) {
        route_sigmoid_topk(logits + t * experts, w.score_bias, experts, routing,
                           choices.data() + t * routing.top_k);
    }
    const std::vector<ExpertBatch> batches =
        gather_expert_batches(x, n, hidden, choices, routing.top_k, experts, inter, scratch);

    std::vector<Product> products{{w.shared_down, shared_mid, n, shared}};
    for (const ExpertBatch& b : batches) {
        require(w.up[b.expert].rows == inter, "moe_relu2: expert ", b.expert, " has ", w.up[b.expert].rows,
                " middle rows, expert 0 ", inter);
        products.push_back({w.up[b.expert], b.rows, b.m(), b.mid});
    }
    matmul_many(products, pool);
    products.clear();
    for (const ExpertBatch& b : batches) {
        relu2_in_place(b.mid, b.m() * inter);
        products.push_back({w.down[b.expert], b.mid, b.m(), b.result});
    }
    matmul_many(products, pool);

    std::fill(out, out + n * hidden, 0.0f);
    add_expert_results(batches, hidden, out);
    for (int64_t i = 0; i < n * hidden; ++i) out[i] += shared[i];
}

}  // namespace duet::cpu
