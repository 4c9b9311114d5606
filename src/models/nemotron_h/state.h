// The per-sequence decoding state of Nemotron-H, with a fixed capacity in tokens: each Mamba layer's
// convolution ring and SSM state, each attention layer's key/value cache, and the draft module's own
// key/value cache when the model has one. For speculative decoding a forward pass can record the
// recurrent state after each of its tokens, so the state can be rolled back to any of them exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "models/causal_lm.h"
#include "models/decode_step.h"
#include "models/nemotron_h/config.h"

namespace duet::nemotron_h {

class State final : public SequenceState {
public:
    State(const Config& config, Backend& backend, int64_t capacity, bool with_draft = false);

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
    // A decode step's inputs and logits in backend memory.
    StepSlots& step() { return step_; }

    // The draft (MTP) module's cache: one row per main-model position it has read.
    bool has_draft() const { return draft_keys_.size() > 0; }
    float* draft_keys() { return draft_keys_.data(); }
    float* draft_values() { return draft_values_.data(); }
    int64_t draft_position() const { return draft_position_; }
    void advance_draft(int64_t tokens) { draft_position_ += tokens; }

    // Makes the next forward passes of at most `max_tokens` tokens record the state after each
    // token (0 turns recording off).
    void record_history(Backend& backend, int64_t max_tokens);
    int64_t history_capacity() const { return history_tokens_; }
    float* conv_history(int64_t slot) { return conv_history_.empty() ? nullptr : conv_history_[slot].data(); }
    float* ssm_history(int64_t slot) { return ssm_history_.empty() ? nullptr : ssm_history_[slot].data(); }
    // After a recorded forward pass of `fed` tokens, keeps only its first `kept` (1 <= kept <= fed).
    void roll_back(Backend& backend, int64_t fed, int64_t kept);
    // Back to an empty sequence, keeping the memory.
    void reset(Backend& backend) override;

private:
    int64_t capacity_;
    int64_t position_ = 0;
    std::vector<Buffer> conv_, ssm_, keys_, values_;
    Buffer draft_keys_, draft_values_;
    int64_t draft_position_ = 0;
    int64_t history_tokens_ = 0;
    std::vector<Buffer> conv_history_, ssm_history_;
    int64_t conv_size_ = 0, ssm_size_ = 0;
    StepSlots step_;
};

}  // namespace duet::nemotron_h
