#include "kernels/cpu/bidirectional_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/work_split.h"

namespace duet::cpu {

void bidirectional_attention(const BidirectionalAttentionArgs& a, ThreadPool* pool) {
    const int64_t hd = a.head_dim, width = a.heads * hd;
    parallel_for(pool, a.n * a.heads, grain_for(a.keys * hd * 4), [&](int64_t begin, int64_t end) {
        std::vector<float> scores(static_cast<size_t>(a.keys));
        for (int64_t r = begin; r < end; ++r) {
            const int64_t t = r / a.heads, h = r % a.heads;
            const float* q = a.q + t * a.stride + h * hd;
            float max_score = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < a.keys; ++j) {
                scores[j] = dot_f32(q, a.k + j * a.stride + h * hd, hd) * a.scale;
                max_score = std::max(max_score, scores[j]);
            }
            float sum = 0.0f;
            for (int64_t j = 0; j < a.keys; ++j) {
                scores[j] = std::exp(scores[j] - max_score);
                sum += scores[j];
            }
            float* out = a.out + t * width + h * hd;
            std::fill(out, out + hd, 0.0f);
            for (int64_t j = 0; j < a.keys; ++j) axpy_f32(scores[j] / sum, a.v + j * a.stride + h * hd, out, hd);
        }
    });
}

}  // namespace duet::cpu
