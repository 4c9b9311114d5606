#include "models/nemotron_h/state.h"

#include "base/error.h"

namespace duet::nemotron_h {

State::State(const Config& c, Backend& backend, int64_t capacity) : capacity_(capacity) {
    require(capacity > 0, "state capacity is ", capacity, ", expected a positive number of tokens");
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
}

}  // namespace duet::nemotron_h
