#include "kernels/cpu/gated_attention.h"

#include <cmath>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/work_split.h"

namespace duet::cpu {

void head_rmsnorm_rope(const HeadNormRopeArgs& a, ThreadPool* pool) {
    require(a.rotary_dim >= 0 && a.rotary_dim <= a.head_dim && a.rotary_dim % 2 == 0, "head_rmsnorm_rope: rotary_dim ",
            a.rotary_dim, " must be even and at most head_dim ", a.head_dim);
    const int64_t half = a.rotary_dim / 2;
    parallel_for(pool, a.n, grain_for(a.heads * a.head_dim * 8), [&](int64_t begin, int64_t end) {
        std::vector<float> cos(static_cast<size_t>(half)), sin(cos.size()), head(static_cast<size_t>(a.head_dim));
        for (int64_t t = begin; t < end; ++t) {
            if (half > 0) rope_angles(a.pos + t, a.rotary_dim, a.theta, cos.data(), sin.data());
            for (int64_t h = 0; h < a.heads; ++h) {
                const float* src = a.x + t * a.x_row_stride + h * a.x_head_stride;
                const float inv = inverse_rms(src, a.head_dim, a.eps);
                for (int64_t i = 0; i < a.head_dim; ++i) head[i] = a.norm_weight[i] * (src[i] * inv);
                if (half > 0 && a.style == RopeStyle::RotateHalf) {
                    rope_rotate_half(head.data(), a.rotary_dim, cos.data(), sin.data());
                } else if (half > 0) {
                    rope_interleaved(head.data(), a.rotary_dim, cos.data(), sin.data());
                }
                std::copy(head.begin(), head.end(), a.out + t * a.out_row_stride + h * a.head_dim);
            }
        }
    });
}

void sigmoid_gate_heads(float* y, const float* gate, int64_t gate_row_stride, int64_t gate_head_stride, int64_t n,
                        int64_t heads, int64_t head_dim, ThreadPool* pool) {
    parallel_for(pool, n, grain_for(heads * head_dim * 20), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
            for (int64_t h = 0; h < heads; ++h) {
                float* row = y + (t * heads + h) * head_dim;
                const float* g = gate + t * gate_row_stride + h * gate_head_stride;
                for (int64_t i = 0; i < head_dim; ++i) row[i] *= sigmoid(g[i]);
            }
        }
    });
}

void head_rmsnorm_silu_gate(float* y, const float* z, int64_t z_stride, const float* weight, int64_t n,
                            int64_t heads, int64_t head_dim, float eps, ThreadPool* pool) {
    parallel_for(pool, n, grain_for(heads * head_dim * 30), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
            for (int64_t h = 0; h < heads; ++h) {
                float* row = y + (t * heads + h) * head_dim;
                const float* gate = z + t * z_stride + h * head_dim;
                const float inv = inverse_rms(row, head_dim, eps);
                for (int64_t i = 0; i < head_dim; ++i) row[i] = weight[i] * (row[i] * inv) * silu(gate[i]);
            }
        }
    });
}

}  // namespace duet::cpu
