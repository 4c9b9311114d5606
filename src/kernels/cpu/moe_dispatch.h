// The part of a mixture of experts that does not depend on the expert's function: grouping the
// tokens by the experts chosen for them, gathering each chosen expert's rows, and adding its
// weighted results back to each token. Experts are kept in index order and each token's results
// are added in that order, so the sum does not depend on the pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/moe_routing.h"

namespace duet::cpu {

struct ExpertAssignment {
    int64_t token;
    float weight;
};

// One chosen expert's work: the tokens it serves (in token order), their rows of x gathered, and
// room for its middle activations and its result.
struct ExpertBatch {
    int64_t expert = 0;
    std::vector<ExpertAssignment> served;
    float* rows = nullptr;    // [m, hidden]
    float* mid = nullptr;     // [m, mid_width]
    float* result = nullptr;  // [m, hidden]

    int64_t m() const { return static_cast<int64_t>(served.size()); }
};

// Floats a mixture's scratch, carved out one piece after another.
class ScratchCarver {
public:
    // This thread's scratch of at least `floats`, kept between calls: a mixture asks for the same
    // sizes token after token, and memory given back and asked for again returns as fresh pages,
    // each faulted in (a 64-token mixture of a3b's shapes ran 1.4 times slower so on a 2-core
    // virtual machine). Pieces carved earlier on this thread are given up.
    explicit ScratchCarver(size_t floats);
    // The next `floats`, starting on a cache line (so whole rows of a line's multiple need no copy
    // before a product reads them).
    float* take(size_t floats);

    static constexpr size_t kLineFloats = 16;
    // The floats a piece of `floats` takes.
    static size_t room(int64_t floats) {
        return (static_cast<size_t>(floats) + kLineFloats - 1) / kLineFloats * kLineFloats;
    }

private:
    float* next_;
    float* end_;
};

// The floats gather_expert_batches carves: every chosen (token, expert) pair's row, middle and
// result, and each batch's three pieces rounded up to whole lines.
inline size_t expert_batch_floats(int64_t n, int64_t top_k, int64_t hidden, int64_t mid_width) {
    return static_cast<size_t>(n * top_k) * (static_cast<size_t>(2 * hidden + mid_width) + 3 * ScratchCarver::kLineFloats);
}

// The experts that serve at least one token, in index order, their rows gathered from x [n, hidden].
// choices is [n, top_k].
std::vector<ExpertBatch> gather_expert_batches(const float* x, int64_t n, int64_t hidden,
                                               const std::vector<ExpertChoice>& choices, int64_t top_k,
                                               int64_t experts, int64_t mid_width, ScratchCarver& scratch);

// out[token] += weight · batch.result[i] for every batch in order, every token it serves.
void add_expert_results(const std::vector<ExpertBatch>& batches, int64_t hidden, float* out);

}  // namespace duet::cpu
