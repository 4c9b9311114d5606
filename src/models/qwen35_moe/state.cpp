#include "models/qwen35_moe/state.h"

#include "base/error.h"

namespace duet::qwen35_moe {

State::State(const Config& c, Backend& backend, int64_t capacity) : capacity_(capacity), step_(backend, c.vocab) {
    require(capacity > 0, "state capacity is ", capacity, ", expected a positive number of tokens");
    for (LayerKind kind : c.layers) {
        if (kind == LayerKind::LinearAttention) {
            conv_.push_back(backend.alloc(static_cast<size_t>((c.conv_kernel - 1) * c.conv_dim())));
            delta_.push_back(backend.alloc(static_cast<size_t>(c.linear_v_heads * c.linear_k_dim * c.linear_v_dim)));
        } else {
            keys_.push_back(backend.alloc(static_cast<size_t>(capacity * c.kv_heads * c.head_dim)));
            values_.push_back(backend.alloc(static_cast<size_t>(capacity * c.kv_heads * c.head_dim)));
        }
    }
}

void State::reset(Backend& backend) {
    std::vector<float> zeros;
    for (auto* buffers : {&conv_, &delta_}) {
        for (Buffer& b : *buffers) {
            zeros.assign(b.size(), 0.0f);
            backend.upload(b.data(), zeros.data(), b.size());
        }
    }
    position_ = 0;  // cache rows past the position are never read
}

}  // namespace duet::qwen35_moe
