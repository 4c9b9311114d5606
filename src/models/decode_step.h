// What a recorded decode step reads from the backend's memory, so one recording serves every step:
// the input id and the position, written before each step; the step's output buffer and, for a step
// that chooses its next token, where the choice goes; and the key
// that names the recording, renewed whenever buffers the step uses are replaced.
#pragma once

#include <cstdint>
#include <memory>

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
