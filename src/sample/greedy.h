// Greedy choice: the index of the largest logit, the first one on ties; a NaN counts as larger than
// every number (as torch.argmax has it, and the GPU's order keys), so the first NaN wins.
#pragma once

#include <cmath>
#include <cstdint>

namespace duet {

inline int32_t argmax(const float* logits, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n && !std::isnan(logits[best]); ++i) {
        if (logits[i] > logits[best] || std::isnan(logits[i])) best = i;
    }
    return static_cast<int32_t>(best);
}

}  // namespace duet
