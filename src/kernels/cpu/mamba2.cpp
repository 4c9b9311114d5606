#include "kernels/cpu/mamba2.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/work_split.h"

namespace duet::cpu {

void causal_conv1d_silu(const float* x, int64_t x_stride, int64_t n, int64_t channels, const float* taps,
                        const float* bias, int64_t kernel, float* ring, float* out, ThreadPool* pool,
                        float* ring_history) {
    const int64_t history = kernel - 1;
    parallel_for(pool, channels, grain_for((n + history) * kernel), [&](int64_t begin, int64_t end) {
        // The channel's inputs in time order: the ring's history, then the n new tokens.
        std::vector<float> seq(static_cast<size_t>(history + n));
        for (int64_t c = begin; c < end; ++c) {
            for (int64_t j = 0; j < history; ++j) seq[j] = ring[j * channels + c];
            for (int64_t t = 0; t < n; ++t) seq[history + t] = x[t * x_stride + c];
            const float* w = taps + c * kernel;
            for (int64_t t = 0; t < n; ++t) {
                float acc = bias != nullptr ? bias[c] : 0.0f;
                for (int64_t j = 0; j < kernel; ++j) acc += w[j] * seq[t + j];
                out[t * channels + c] = silu(acc);
            }
            for (int64_t j = 0; j < history; ++j) ring[j * channels + c] = seq[n + j];
            if (ring_history != nullptr) {
                // After token t the ring holds inputs t+1-history .. t, i.e. seq[t+1 .. t+history].
                for (int64_t t = 0; t < n; ++t) {
                    for (int64_t j = 0; j < history; ++j) {
                        ring_history[(t * history + j) * channels + c] = seq[t + 1 + j];
                    }
                }
            }
        }
    });
}

void ssm_scan(const SsmScanArgs& a, ThreadPool* pool) {
    const int64_t inner = a.heads * a.head_dim;
    const int64_t heads_per_group = a.heads / a.groups;
    const int64_t ns = a.state_size;
    parallel_for(pool, a.heads, grain_for(a.n * a.head_dim * ns * 4), [&](int64_t begin, int64_t end) {
        for (int64_t h = begin; h < end; ++h) {
            const int64_t g = h / heads_per_group;
            float* state = a.state + h * a.head_dim * ns;
            for (int64_t t = 0; t < a.n; ++t) {
                float dt = softplus(a.dt[t * a.dt_stride + h] + a.dt_bias[h]);
                dt = std::clamp(dt, a.dt_min, a.dt_max);
                const float decay = std::exp(dt * a.a[h]);
                const float* row = a.x + t * a.x_stride;
                const float* xh = row + h * a.head_dim;
                const float* b = row + inner + g * ns;
                const float* c = row + inner + a.groups * ns + g * ns;
                float* y = a.y + t * inner + h * a.head_dim;
                for (int64_t p = 0; p < a.head_dim; ++p) {
                    float* s = state + p * ns;
                    const float dx = dt * xh[p];
                    for (int64_t k = 0; k < ns; ++k) s[k] = s[k] * decay + dx * b[k];
                    y[p] = dot_f32(s, c, ns) + a.d[h] * xh[p];
                }
                if (a.state_history != nullptr) {
                    const int64_t size = a.head_dim * ns;
                    std::copy(state, state + size, a.state_history + (t * a.heads + h) * size);
                }
            }
        }
    });
}

}  // namespace duet::cpu
