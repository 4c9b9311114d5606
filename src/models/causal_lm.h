// What every text-generating architecture offers the CLI, the benchmarks and the generation loops:
// load, describe, make a sequence state, run tokens through. Each architecture implements it once
// (models/<arch>/) and registers in registry.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "sample/greedy.h"

namespace duet {

// A sequence's recurrent state and caches, with a fixed capacity in tokens.
class SequenceState {
public:
    virtual ~SequenceState() = default;
    virtual int64_t capacity() const = 0;
    virtual int64_t position() const = 0;
    int64_t room() const { return capacity() - position(); }
    // Back to an empty sequence, keeping the memory.
    virtual void reset(Backend& backend) = 0;
};

// Receives hidden states on the host, transformers' convention: index 0 the input embeddings,
// index i (1 <= i < layers) the residual stream after layer i, index `layers` the last layer's
// output after the final norm. rows is [n, hidden].
using HiddenHook = std::function<void(int64_t index, const float* rows, int64_t n)>;

class CausalLM {
public:
    virtual ~CausalLM() = default;

    virtual std::string arch() const = 0;
    virtual int64_t vocab() const = 0;
    // Name/value lines for `duet info` (architecture, sizes, layout).
    virtual std::vector<std::pair<std::string, std::string>> describe() const = 0;
    virtual size_t tensor_count() const = 0;
    virtual size_t tensor_bytes() const = 0;
    // Weight bytes one decode token reads.
    virtual size_t decode_weight_bytes() const = 0;
    // State bytes one decode token at `position` reads and writes (recurrent states, cache rows).
    virtual size_t decode_state_bytes(int64_t position) const = 0;

    virtual std::unique_ptr<SequenceState> create_state(Backend& backend, int64_t capacity) const = 0;

    // Runs `ids` from the state's position and advances it. Returns host logits: [n, vocab] when
    // all_logits, else [1, vocab] for the last token. Throws, leaving the state untouched, for an
    // id outside the vocabulary or more tokens than the state has room for.
    virtual std::vector<float> forward(Backend& backend, SequenceState& state, std::span<const int32_t> ids,
                                       bool all_logits, const HiddenHook& hook = {}) const = 0;

    // Runs one token, as forward does, and returns the greedy choice after it: the largest logit's
    // index, the lowest on ties. A model may choose on the backend and read back only the token
    // (a whole vocabulary of logits is the larger part of a decode step's traffic to the host).
    virtual int32_t next_greedy(Backend& backend, SequenceState& state, int32_t id) const;
};

inline int32_t CausalLM::next_greedy(Backend& backend, SequenceState& state, int32_t id) const {
    const std::vector<float> logits = forward(backend, state, std::span<const int32_t>(&id, 1), false);
    return argmax(logits.data(), vocab());
}

}  // namespace duet
