// What a recorded decode step reads from the backend's memory, so one recording serves every step:
// the input id and the position, written before each step; the step's output buffer and, for a step
// that chooses its next token, where the choice goes; and the key that names the recording, renewed
// whenever buffers the step uses are replaced.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace duet {

class StepSlots {
public:
    StepSlots(Backend& backend, int64_t output_floats)
        : ints_(backend.alloc(3)), output_(backend.alloc(static_cast<size_t>(output_floats))) {}

    const int32_t* id() const { return ints_.ints(); }
    const int32_t* position() const { return ints_.ints() + 1; }
    // Where a step that also chooses its next token leaves it.
    int32_t* choice() const { return ints_.ints() + 2; }
    float* output() const { return output_.data(); }
    const std::shared_ptr<const void>& key() const { return key_; }

    // Writes the next step's input id and position.
    void set(Backend& backend, int32_t id, int64_t position) {
        const int32_t values[2] = {id, static_cast<int32_t>(position)};
        backend.upload_ints(ints_.ints(), values, 2);
    }
    // The last op of a step that chooses its next token: the greedy choice over the step's output
    // (`vocab` logits; the largest, the lowest index on ties) into choice(). One recording then
    // serves callers that read the logits and callers that read only the token: the choice costs one
    // small launch a step, reading back a token in place of a vocabulary of logits saves far more.
    void choose_greedy(Backend& backend, int64_t vocab) const {
        SamplingParams greedy;
        greedy.temperature = 0.0f;  // the argmax: no random draw is made, so any counter will do
        backend.sample(output(), 1, vocab, greedy, DrawCounter{0, position(), 0}, choice());
    }
    // What the last step left: its `count` logits, or its chosen token.
    std::vector<float> read_output(Backend& backend, int64_t count) const {
        std::vector<float> host(static_cast<size_t>(count));
        backend.download(host.data(), output(), host.size());
        return host;
    }
    int32_t read_choice(Backend& backend) const {
        int32_t token = 0;
        backend.download_ints(&token, choice(), 1);
        return token;
    }
    // Forgets recordings made so far (their buffers are about to change).
    void renew() { key_ = std::make_shared<int>(0); }

private:
    Buffer ints_, output_;
    std::shared_ptr<const void> key_ = std::make_shared<int>(0);
};

// Where a forward pass's position-dependent ops find the position: `pos` on the host, and for a
// recorded step also in backend memory (`at`), with the cache's capacity bounding the context.
struct StepPosition {
    int64_t pos = 0;
    const int32_t* at = nullptr;
    int64_t capacity = 0;
};

}  // namespace duet
