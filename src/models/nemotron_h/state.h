// The per-sequence decoding state of Nemotron-H, with a fixed capacity in tokens: each Mamba layer's
// convolution ring and SSM state, each attention layer's key/value cache.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "models/causal_lm.h"
#include "models/nemotron_h/config.h"

namespace duet::nemotron_h {

class State final : public SequenceState {
public:
    State(const Config& config, Backend& backend, int64_t capacity);

    int64_t capacity() const override { return capacity_; }
    int64_t position() const override { return position_; }

    float* conv_ring(int64_t slot) { return conv_[slot].data(); }
    float* ssm_state(int64_t slot) { return ssm_[slot].data(); }
    float* keys(int64_t slot) { return keys_[slot].data(); }
    float* values(int64_t slot) { return values_[slot].data(); }

    const Buffer& ssm_buffer(int64_t slot) const { return ssm_[slot]; }
    const Buffer& conv_buffer(int64_t slot) const { return conv_[slot]; }
    const Buffer& keys_buffer(int64_t slot) const { return keys_[slot]; }
    int64_t mamba_layers() const { return static_cast<int64_t>(ssm_.size()); }
    int64_t attention_layers() const { return static_cast<int64_t>(keys_.size()); }

    void advance(int64_t tokens) { position_ += tokens; }
    // Back to an empty sequence, keeping the memory.
    void reset(Backend& backend) override;

private:
    int64_t capacity_;
    int64_t position_ = 0;
    std::vector<Buffer> conv_, ssm_, keys_, values_;
};

}  // namespace duet::nemotron_h
