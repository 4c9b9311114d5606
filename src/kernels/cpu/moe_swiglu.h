// A softmax-routed mixture of SwiGLU experts with a sigmoid-gated shared expert (Qwen3.5-MoE), on
// the CPU.
#pragma once

#include "backend/backend.h"

namespace duet::cpu {

void moe_swiglu(const float* x, int64_t n, const SwigluMoeWeights& weights, int64_t top_k, bool normalize,
                float* out, ThreadPool* pool);

// out[n, hidden] = down(silu(gate · x) · (up · x)), using `mid` [2, n, gate.rows] as scratch.
void swiglu_mlp(const float* x, int64_t n, const MatrixView& gate, const MatrixView& up, const MatrixView& down,
                float* mid, float* out, ThreadPool* pool);

}  // namespace duet::cpu
