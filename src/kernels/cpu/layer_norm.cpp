#include "kernels/cpu/layer_norm.h"

#include <cmath>

#include "base/thread_pool.h"
#include "kernels/cpu/work_split.h"

namespace duet::cpu {

// Mean and variance in double: their rounding would otherwise show in every output value.
void layer_norm_row(const float* x, int64_t dim, const float* weight, const float* bias, float eps, float* out) {
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += x[i];
    const double mean = sum / static_cast<double>(dim);
    double squares = 0.0;
    for (int64_t i = 0; i < dim; ++i) {
        const double d = x[i] - mean;
        squares += d * d;
    }
    const double inv_std = 1.0 / std::sqrt(squares / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
        out[i] = static_cast<float>((x[i] - mean) * inv_std) * weight[i] + bias[i];
    }
}

void layer_norm(const float* x, int64_t n, int64_t dim, const float* weight, const float* bias, float eps, float* out,
                ThreadPool* pool) {
    parallel_for(pool, n, grain_for(dim * 6), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) layer_norm_row(x + t * dim, dim, weight, bias, eps, out + t * dim);
    });
}

}  // namespace duet::cpu
