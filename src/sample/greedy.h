// How logits rank, and the greedy choice: the index of the first-ranked logit.
#pragma once

#include <cmath>
#include <cstdint>

namespace duet {

// Whether logits[a] ranks before logits[b]: the larger first, ties to the lower index, a NaN of
// either sign above every number (as torch.argmax has it, and the GPU's order keys). A total order,
// whatever the logits hold, as a sort needs.
inline bool ranks_before(const float* logits, int64_t a, int64_t b) {
    const bool nan_a = std::isnan(logits[a]), nan_b = std::isnan(logits[b]);
    if (nan_a || nan_b) return nan_a && (!nan_b || a < b);
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

inline int32_t argmax(const float* logits, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
        if (ranks_before(logits, i, best)) best = i;
    }
    return static_cast<int32_t>(best);
}

}  // namespace duet
