// Normalisations: plain RMSNorm and Mamba-2's gated group RMSNorm.
#pragma once

#include <cstdint>

namespace duet {
class ThreadPool;
}

namespace duet::cpu {

// 1 / sqrt(mean(x²) + eps) over dim values: the scale every RMS norm applies.
float inverse_rms(const float* x, int64_t dim, float eps);

// out[t] = x[t] * (1 / sqrt(mean(x[t]²) + eps)) * weight, for n rows of width dim.
void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out,
             ThreadPool* pool);

// y[t] *= silu(z[t]), then each of `groups` contiguous groups of y[t] is RMS-normalised and scaled
// by weight. z[t] starts at z + t * z_stride.
void gated_group_rmsnorm(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                         int64_t dim, int64_t groups, float eps, ThreadPool* pool);

}  // namespace duet::cpu
