// Causal grouped-query softmax attention of new tokens over a key/value cache.
#pragma once

#include "backend/backend.h"

namespace duet::cpu {

void attention(const AttentionArgs& args, ThreadPool* pool);

}  // namespace duet::cpu
