// Greedy choice: the index of the largest logit, the first one on ties (as torch.argmax).
#pragma once

#include <cstdint>

namespace duet {

inline int32_t argmax(const float* logits, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
        if (logits[i] > logits[best]) best = i;
    }
    return static_cast<int32_t>(best);
}

}  // namespace duet
