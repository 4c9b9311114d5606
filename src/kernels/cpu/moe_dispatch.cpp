#include "kernels/cpu/moe_dispatch.h"

#include <algorithm>

#include "base/aligned_vector.h"
#include "base/error.h"
#include "kernels/cpu/matmul.h"

namespace duet::cpu {

ScratchCarver::ScratchCarver(size_t floats) {
    thread_local CacheAlignedVector<float> scratch;
    if (scratch.size() < floats) scratch.resize(floats);
    next_ = scratch.data();
    end_ = next_ + floats;
}

float* ScratchCarver::take(size_t floats) {
    const size_t lines = room(static_cast<int64_t>(floats));
    require(lines <= static_cast<size_t>(end_ - next_), "mixture scratch: ", floats, " floats asked, ",
            end_ - next_, " left");
    float* piece = next_;
    next_ += lines;
    return piece;
}

std::vector<ExpertBatch> gather_expert_batches(const float* x, int64_t n, int64_t hidden,
                                               const std::vector<ExpertChoice>& choices, int64_t top_k,
                                               int64_t experts, int64_t mid_width, ScratchCarver& scratch) {
    std::vector<std::vector<ExpertAssignment>> served(static_cast<size_t>(experts));
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t i = 0; i < top_k; ++i) {
            const ExpertChoice& c = choices[t * top_k + i];
            served[c.expert].push_back({t, c.weight});
        }
    }
    std::vector<ExpertBatch> batches;
    for (int64_t e = 0; e < experts; ++e) {
        if (served[e].empty()) continue;
        ExpertBatch& b = batches.emplace_back();
        b.expert = e;
        b.served = std::move(served[e]);
        b.rows = scratch.take(static_cast<size_t>(b.m() * hidden));
        b.mid = scratch.take(static_cast<size_t>(b.m() * mid_width));
        b.result = scratch.take(static_cast<size_t>(b.m() * hidden));
        for (int64_t i = 0; i < b.m(); ++i) {
            const float* row = x + b.served[i].token * hidden;
            std::copy(row, row + hidden, b.rows + i * hidden);
        }
    }
    return batches;
}

void add_expert_results(const std::vector<ExpertBatch>& batches, int64_t hidden, float* out) {
    for (const ExpertBatch& b : batches) {
        for (int64_t i = 0; i < b.m(); ++i) {
            axpy_f32(b.served[i].weight, b.result + i * hidden, out + b.served[i].token * hidden, hidden);
        }
    }
}

}  // namespace duet::cpu
