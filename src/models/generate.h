// Greedy generation with any causal LM: one batched prefill of the prompt, then one token at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/causal_lm.h"

namespace duet {

struct GreedyOutput {
    std::vector<int32_t> ids;
    // [count, vocab] when asked for: the logits that chose each generated token.
    std::vector<float> step_logits;
};

// Continues `prompt` by `count` greedy tokens. Checks up front that the prompt and the tokens fed
// back fit the state.
// Throws unless the prompt is non-empty and it and the `count` tokens after it fit the state.
void require_generation_fits(std::span<const int32_t> prompt, int64_t count, const SequenceState& state);

GreedyOutput generate_greedy(const CausalLM& model, Backend& backend, SequenceState& state, std::span<const int32_t> prompt,
                             int64_t count, bool keep_step_logits = false);

}  // namespace duet
