// Expert routing: sigmoid scores with a selection-only bias (DeepSeek-V3 / Nemotron-H style) and
// softmax scores (Qwen3.5-MoE style).
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

// Chooses top_k experts for one token from its router logits [experts]: p = softmax(logits) in f32,
// the top_k largest p (ties to the lower index), each weighed by p, divided by Σ p_chosen when
// normalising. `out` has top_k entries, best first.
void route_softmax_topk(const float* logits, int64_t experts, int64_t top_k, bool normalize, ExpertChoice* out);

}  // namespace duet::cpu
