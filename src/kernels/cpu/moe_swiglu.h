// A softmax-routed mixture of SwiGLU experts with a sigmoid-gated shared expert (Qwen3.5-MoE), on
// the CPU.
#pragma once

#include "backend/backend.h"

namespace duet::cpu {

void moe_swiglu(const float* x, int64_t n, const SwigluMoeWeights& weights, int64_t top_k, bool normalize,
                float* out, ThreadPool* pool);

}  // namespace duet::cpu
