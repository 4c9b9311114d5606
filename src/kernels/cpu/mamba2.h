// The two sequence operations of a Mamba-2 mixer: the depthwise causal convolution over xBC and the
// selective state-space scan.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace duet::cpu {

void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                        const float* bias, int64_t kernel, float* ring, float* out, ThreadPool* pool,
                        float* ring_history = nullptr);

void ssm_scan(const SsmScanArgs& args, ThreadPool* pool);

}  // namespace duet::cpu
