// A mixture of relu² experts with one shared expert, on the CPU.
#pragma once

#include "backend/backend.h"

namespace duet::cpu {

void moe_relu2(const float* x, int64_t n, const MoeWeights& weights, const MoeRouting& routing, float* out,
               ThreadPool* pool);

// out[n, hidden] = down(relu²(up · x)), using `mid` [n, up.rows] as scratch.
void relu2_mlp(const float* x, int64_t n, const MatrixView& up, const MatrixView& down, float* mid, float* out,
               ThreadPool* pool);

}  // namespace duet::cpu
