#include "models/generate.h"

#include <algorithm>

#include "base/error.h"
#include "sample/greedy.h"

namespace duet {

void require_generation_fits(std::span<const int32_t> prompt, int64_t count, const SequenceState& state) {
    require(!prompt.empty(), "generate: the prompt is empty");
    require(count >= 0, "generate: cannot generate ", count, " tokens");
    // The last generated token is never fed back.
    const int64_t needed = static_cast<int64_t>(prompt.size()) + std::max<int64_t>(count - 1, 0);
    require(needed <= state.room(), "a prompt of ", prompt.size(), " tokens plus ", count,
            " generated tokens does not fit the state: capacity ", state.capacity(), " tokens, ",
            state.position(), " already used");
}

GreedyOutput generate_greedy(const CausalLM& model, Backend& backend, SequenceState& state, std::span<const int32_t> prompt,
                             int64_t count, bool keep_step_logits) {
    require_generation_fits(prompt, count, state);
    GreedyOutput out;
    if (count == 0) return out;
    const int64_t vocab = model.vocab();
    std::vector<float> logits = model.forward(backend, state, prompt, false);
    for (int64_t step = 0; step < count; ++step) {
        if (step > 0) {
            const int32_t last = out.ids.back();
            if (!keep_step_logits) {  // the model's own greedy step: no logits come back
                out.ids.push_back(model.next_greedy(backend, state, last));
                continue;
            }
            logits = model.forward(backend, state, std::span<const int32_t>(&last, 1), false);
        }
        out.ids.push_back(argmax(logits.data(), vocab));
        if (keep_step_logits) out.step_logits.insert(out.step_logits.end(), logits.begin(), logits.end());
    }
    return out;
}

}  // namespace duet
