#include "models/nemotron_h/state.h"

#include "base/error.h"

namespace duet::nemotron_h {

State::State(const Config& c, Backend& backend, int64_t capacity, bool with_draft)
    : capacity_(capacity), step_(backend, c.vocab) {
    require(capacity > 0, "state capacity is ", capacity, ", expected a positive number of tokens");
    conv_size_ = (c.conv_kernel - 1) * c.conv_dim();
    ssm_size_ = c.mamba_inner() * c.ssm_state;
    if (with_draft) {
        draft_keys_ = backend.alloc(static_cast<size_t>(capacity * c.kv_heads * c.head_dim));
        draft_values_ = backend.alloc(static_cast<size_t>(capacity * c.kv_heads * c.head_dim));
    }
    for (LayerKind kind : c.layers) {
        if (kind == LayerKind::Mamba) {
            conv_.push_back(backend.alloc(static_cast<size_t>((c.conv_kernel - 1) * c.conv_dim())));
            ssm_.push_back(backend.alloc(static_cast<size_t>(c.mamba_inner() * c.ssm_state)));
        } else if (kind == LayerKind::Attention) {
            keys_.push_back(backend.alloc(static_cast<size_t>(capacity * c.kv_heads * c.head_dim)));
            values_.push_back(backend.alloc(static_cast<size_t>(capacity * c.kv_heads * c.head_dim)));
        }
    }
}

void State::reset(Backend& backend) {
    std::vector<float> zeros;
    for (auto* buffers : {&conv_, &ssm_}) {
        for (Buffer& b : *buffers) {
            zeros.assign(b.size(), 0.0f);
            backend.upload(b.data(), zeros.data(), b.size());
        }
    }
    position_ = 0;  // cache rows past the position are never read
    draft_position_ = 0;
}

void State::record_history(Backend& backend, int64_t max_tokens) {
    require(max_tokens >= 0, "history of ", max_tokens, " tokens");
    conv_history_.clear();
    ssm_history_.clear();
    history_tokens_ = max_tokens;
    step_.renew();  // recorded steps wrote the old history buffers
    if (max_tokens == 0) return;
    for (size_t slot = 0; slot < conv_.size(); ++slot) {
        conv_history_.push_back(backend.alloc(static_cast<size_t>(max_tokens * conv_size_)));
        ssm_history_.push_back(backend.alloc(static_cast<size_t>(max_tokens * ssm_size_)));
    }
}

void State::roll_back(Backend& backend, int64_t fed, int64_t kept) {
    require(history_tokens_ >= fed && kept >= 1 && kept <= fed && fed <= position_,
            "roll back: cannot keep ", kept, " of ", fed, " recorded tokens");
    if (kept == fed) return;
    for (size_t slot = 0; slot < conv_.size(); ++slot) {
        backend.copy(conv_[slot].data(), conv_history_[slot].data() + (kept - 1) * conv_size_,
                     static_cast<size_t>(conv_size_));
        backend.copy(ssm_[slot].data(), ssm_history_[slot].data() + (kept - 1) * ssm_size_,
                     static_cast<size_t>(ssm_size_));
    }
    position_ -= fed - kept;  // attention rows past the position are overwritten before being read
}

}  // namespace duet::nemotron_h
