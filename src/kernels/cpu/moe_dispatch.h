// The part of a mixture of experts that does not depend on the expert's function: grouping the
// tokens by the experts chosen for them, running each expert once over all of its rows, and
// adding its weighted results back to each token. Experts run in index order and each token's
// results are added in that order, so the sum does not depend on the pool.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cpu/moe_routing.h"

namespace duet::cpu {

struct ExpertAssignment {
    int64_t token;
    float weight;
};

// served[e]: the tokens expert e serves, in token order. choices is [n, top_k].
std::vector<std::vector<ExpertAssignment>> group_tokens_by_expert(const std::vector<ExpertChoice>& choices,
                                                                  int64_t n, int64_t top_k, int64_t experts);

// expert(e, rows, m, result): rows [m, hidden] → result [m, hidden].
using ExpertFn = std::function<void(int64_t expert, const float* rows, int64_t m, float* result)>;

// out[token] += weight · expert(x[token]) for every assignment; out is not cleared first.
void run_routed_experts(const float* x, int64_t hidden, const std::vector<std::vector<ExpertAssignment>>& served,
                        const ExpertFn& expert, float* out);

}  // namespace duet::cpu
