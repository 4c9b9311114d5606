// LayerNorm as torch.nn.LayerNorm computes it: (x − mean) / sqrt(biased variance + eps) · weight + bias.
#pragma once

#include <cstdint>

namespace duet {
class ThreadPool;
}

namespace duet::cpu {

// One row of dim values; out may equal x.
void layer_norm_row(const float* x, int64_t dim, const float* weight, const float* bias, float eps, float* out);

// n rows of width dim, row-major; out may equal x.
void layer_norm(const float* x, int64_t n, int64_t dim, const float* weight, const float* bias, float eps, float* out,
                ThreadPool* pool);

}  // namespace duet::cpu
