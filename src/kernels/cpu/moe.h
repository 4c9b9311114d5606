// A mixture of relu² experts with one shared expert, on the CPU.
#pragma once

#include "backend/backend.h"

namespace duet::cpu {

void moe_relu2(const float* x, int64_t n, const MoeWeights& weights, const MoeRouting& routing, float* out,
               ThreadPool* pool);

}  // namespace duet::cpu
