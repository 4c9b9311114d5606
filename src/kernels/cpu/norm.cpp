#include "kernels/cpu/norm.h"

#include <cmath>

#include "base/thread_pool.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/work_split.h"

namespace duet::cpu {

// Sum of squares in double: the mean of squares is the one reduction whose rounding shows in
// every element of the output.
float inverse_rms(const float* x, int64_t dim, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(x[i]) * x[i];
    return 1.0f / std::sqrt(static_cast<float>(sum / dim) + eps);
}

void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out,
             ThreadPool* pool) {
    parallel_for(pool, n, grain_for(dim * 4), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
            const float* row = x + t * dim;
            float* dst = out + t * dim;
            float inv = inverse_rms(row, dim, eps);
            for (int64_t i = 0; i < dim; ++i) dst[i] = weight[i] * (row[i] * inv);
        }
    });
}

void gated_group_rmsnorm(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                         int64_t dim, int64_t groups, float eps, ThreadPool* pool) {
    const int64_t group_size = dim / groups;
    parallel_for(pool, n, grain_for(dim * 30), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
            float* row = y + t * dim;
            const float* gate = z + t * z_stride;
            for (int64_t i = 0; i < dim; ++i) row[i] *= silu(gate[i]);
            for (int64_t g = 0; g < groups; ++g) {
                float* part = row + g * group_size;
                float inv = inverse_rms(part, group_size, eps);
                const float* w = weight + g * group_size;
                for (int64_t i = 0; i < group_size; ++i) part[i] = w[i] * (part[i] * inv);
            }
        }
    });
}

}  // namespace duet::cpu
