// The per-sequence decoding state of Qwen3.5-MoE, with a fixed capacity in tokens: each Gated
// DeltaNet layer's convolution ring and delta-rule state (f32), each attention layer's key/value
// cache.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "models/causal_lm.h"
#include "models/decode_step.h"
#include "models/qwen35_moe/config.h"

namespace duet::qwen35_moe {

class State final : public SequenceState {
public:
    State(const Config& config, Backend& backend, int64_t capacity);

    int64_t capacity() const override { return capacity_; }
    int64_t position() const override { return position_; }

    float* conv_ring(int64_t slot) { return conv_[slot].data(); }
    float* delta_state(int64_t slot) { return delta_[slot].data(); }
    float* keys(int64_t slot) { return keys_[slot].data(); }
    float* values(int64_t slot) { return values_[slot].data(); }

    const Buffer& conv_buffer(int64_t slot) const { return conv_[slot]; }
    const Buffer& delta_buffer(int64_t slot) const { return delta_[slot]; }
    const Buffer& keys_buffer(int64_t slot) const { return keys_[slot]; }
    const Buffer& values_buffer(int64_t slot) const { return values_[slot]; }
    int64_t linear_layers() const { return static_cast<int64_t>(delta_.size()); }
    int64_t attention_layers() const { return static_cast<int64_t>(keys_.size()); }

    void advance(int64_t tokens) { position_ += tokens; }
    void reset(Backend& backend) override;
    // A decode step's inputs and logits in backend memory.
    StepSlots& step() { return step_; }

private:
    int64_t capacity_;
    int64_t position_ = 0;
    std::vector<Buffer> conv_, delta_, keys_, values_;
    StepSlots step_;
};

}  // namespace duet::qwen35_moe
