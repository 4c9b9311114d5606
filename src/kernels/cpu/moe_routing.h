// Sigmoid expert routing with a selection-only score bias (DeepSeek-V3 / Nemotron-H style).
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace duet::cpu {

struct ExpertChoice {
    int32_t expert;
    float weight;
};

// Chooses routing.top_k experts for one token from its router logits [experts]:
//   s = sigmoid(logits); the choice ranks s + bias (restricted to the best `groups_kept` groups when
//   the experts form several groups, a group scored by the sum of its two best biased scores);
//   each chosen expert is weighed by its unbiased s, divided by (Σ s_chosen + 1e-20) when
//   normalising, times routing.scale. Ties go to the lower expert index. `out` has top_k entries,
//   best first.
void route_sigmoid_topk(const float* logits, const float* bias, int64_t experts, const MoeRouting& routing,
                        ExpertChoice* out);

}  // namespace duet::cpu
