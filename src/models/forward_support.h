// Pieces every causal LM's forward pass shares: checking a request against the vocabulary and the
// state, reporting hidden states to a hook, and the LM head.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "base/error.h"
#include "models/causal_lm.h"

namespace duet {

// Throws, before anything runs, for no tokens, an id outside [0, vocab) or more tokens than the
// state has room for.
void require_forward_fits(std::span<const int32_t> ids, int64_t vocab, const SequenceState& state);

// The architecture's own state behind a SequenceState; throws, naming `arch`, for another's.
template <typename State>
State& own_state(SequenceState& state, const char* arch) {
    auto* own = dynamic_cast<State*>(&state);
    require(own != nullptr, arch, ": the sequence state belongs to another architecture");
    return *own;
}

// Hands hidden states [n, hidden] to a hook on the host; does nothing without a hook.
class HiddenReporter {
public:
    HiddenReporter(Backend& backend, const HiddenHook& hook, int64_t n, int64_t hidden)
        : backend_(backend), hook_(hook), n_(n), hidden_(hidden) {}
    void operator()(int64_t index, const float* rows);

private:
    Backend& backend_;
    const HiddenHook& hook_;
    int64_t n_, hidden_;
    std::vector<float> host_;
};

// Host logits of the LM head over the last `rows` of `normed` [n, hidden].
std::vector<float> lm_head_logits(Backend& backend, const MatrixView& head, const float* normed, int64_t n,
                                  int64_t rows);

}  // namespace duet
