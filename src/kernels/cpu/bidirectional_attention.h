// Bidirectional (non-causal) multi-head softmax attention, as a speech encoder runs it: every query
// row, padding rows included, attends to the first `keys` rows only (the valid frames).
#pragma once

#include <cstdint>

namespace duet {
class ThreadPool;
}

namespace duet::cpu {

struct BidirectionalAttentionArgs {
    int64_t n = 0;      // query rows
    int64_t keys = 0;   // key/value rows attended to, 1 ≤ keys ≤ n
    int64_t heads = 0, head_dim = 0;
    float scale = 0.0f;
    // Row t of head h at q + t * stride + h * head_dim; likewise k and v.
    const float* q = nullptr;
    const float* k = nullptr;
    const float* v = nullptr;
    int64_t stride = 0;
    float* out = nullptr;  // [n, heads * head_dim]
};

void bidirectional_attention(const BidirectionalAttentionArgs& args, ThreadPool* pool);

}  // namespace duet::cpu
