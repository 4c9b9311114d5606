// The per-head steps around Qwen3.5's gated attention: the q/k norm with partial RoPE before the
// attention, the sigmoid output gate after it; and the per-head norm-then-gate of Gated DeltaNet's
// output.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace duet::cpu {

void head_rmsnorm_rope(const HeadNormRopeArgs& args, ThreadPool* pool);

void sigmoid_gate_heads(float* y, const float* gate, int64_t gate_row_stride, int64_t gate_head_stride, int64_t n,
                        int64_t heads, int64_t head_dim, ThreadPool* pool);

void head_rmsnorm_silu_gate(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                            int64_t heads, int64_t head_dim, float eps, ThreadPool* pool);

}  // namespace duet::cpu
