#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/work_split.h"

namespace duet::cpu {

void attention(const AttentionArgs& a, ThreadPool* pool) {
    const int64_t hd = a.head_dim;
    const int64_t kv_width = a.kv_heads * hd;
    const int64_t heads_per_kv = a.heads / a.kv_heads;
    parallel_for(pool, a.n * a.heads, grain_for((a.pos + a.n) * hd * 4), [&](int64_t begin, int64_t end) {
        std::vector<float> scores(static_cast<size_t>(a.pos + a.n));
        for (int64_t r = begin; r < end; ++r) {
            const int64_t t = r / a.heads, h = r % a.heads, kvh = h / heads_per_kv;
            const int64_t visible = a.pos + t + 1;
            const float* q = a.q + (t * a.heads + h) * hd;
            float max_score = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < visible; ++j) {
                scores[j] = dot_f32(q, a.k_cache + j * kv_width + kvh * hd, hd) * a.scale;
                max_score = std::max(max_score, scores[j]);
            }
            float sum = 0.0f;
            for (int64_t j = 0; j < visible; ++j) {
                scores[j] = std::exp(scores[j] - max_score);
                sum += scores[j];
            }
            float* out = a.out + (t * a.heads + h) * hd;
            std::fill(out, out + hd, 0.0f);
            for (int64_t j = 0; j < visible; ++j) {
                axpy_f32(scores[j] / sum, a.v_cache + j * kv_width + kvh * hd, out, hd);
            }
        }
    });
}

}  // namespace duet::cpu
