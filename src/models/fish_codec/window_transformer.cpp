// fish-speech's WindowLimitedTransformer: pre-norm blocks h = x + γ₁·Attn(RMSNorm(x)),
// out = h + γ₂·SwiGLU(RMSNorm(h)), then a final RMSNorm. Attention is causal and sees only the last
// `window` positions; RoPE rotates interleaved pairs over the whole head with a bf16 table, at
// absolute positions, so the state carries the position and the last window - 1 keys and values.
#include <algorithm>
#include <cmath>

#include "base/half.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/norm.h"
#include "models/fish_codec/layers.h"

namespace duet::fish_codec {

void rope_table_bf16(int64_t position, int64_t head_dim, float base, float* cos_out, float* sin_out) {
    const int64_t half = head_dim / 2;
    for (int64_t i = 0; i < half; ++i) {
        // As torch computes it in f32: 1 / base^(2i / head_dim), then position · freq.
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
        const float freq = 1.0f / std::pow(base, exponent);
        const float angle = static_cast<float>(position) * freq;
        cos_out[i] = bf16_to_f32(f32_to_bf16(static_cast<float>(std::cos(static_cast<double>(angle)))));
        sin_out[i] = bf16_to_f32(f32_to_bf16(static_cast<float>(std::sin(static_cast<double>(angle)))));
    }
}

TransformerState new_state(const Transformer& t) {
    TransformerState s;
    s.keys.resize(t.layers.size());
    s.values.resize(t.layers.size());
    return s;
}

namespace {

void rotate_pairs(float* head, int64_t half, const float* cos, const float* sin) {
    for (int64_t i = 0; i < half; ++i) {
        const float a = head[2 * i], b = head[2 * i + 1];
        head[2 * i] = a * cos[i] - b * sin[i];
        head[2 * i + 1] = b * cos[i] + a * sin[i];
    }
}

// Softmax attention of `steps` new queries over `total` keys, the last `steps` of which are the
// queries' own; query t sees the keys of its last `window` positions.
void windowed_attention(const float* q, int64_t q_stride, const float* keys, const float* values, int64_t total,
                        int64_t steps, int64_t n_head, int64_t head_dim, int64_t window, float* out, ThreadPool* pool) {
    const int64_t width = n_head * head_dim, first_query = total - steps;
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    parallel_for(pool, steps * n_head, 4, [&](int64_t begin, int64_t end) {
        std::vector<float> scores(static_cast<size_t>(std::min(window, total)));
        for (int64_t unit = begin; unit < end; ++unit) {
            const int64_t t = unit / n_head, h = unit % n_head;
            const int64_t last = first_query + t, first = std::max<int64_t>(0, last - window + 1);
            const float* query = q + t * q_stride + h * head_dim;
            float max_score = -INFINITY;
            for (int64_t j = first; j <= last; ++j) {
                const float* key = keys + j * width + h * head_dim;
                float dot = 0.0f;
                for (int64_t d = 0; d < head_dim; ++d) dot += query[d] * key[d];
                scores[static_cast<size_t>(j - first)] = dot * scale;
                max_score = std::max(max_score, dot * scale);
            }
            float sum = 0.0f;
            for (int64_t j = first; j <= last; ++j) {
                float& s = scores[static_cast<size_t>(j - first)];
                s = std::exp(s - max_score);
                sum += s;
            }
            float* dst = out + t * width + h * head_dim;
            std::fill(dst, dst + head_dim, 0.0f);
            for (int64_t j = first; j <= last; ++j) {
                const float p = scores[static_cast<size_t>(j - first)] / sum;
                const float* value = values + j * width + h * head_dim;
                for (int64_t d = 0; d < head_dim; ++d) dst[d] += p * value[d];
            }
        }
    });
}

void add_scaled(Signal& x, const Signal& y, const std::vector<float>& scale) {
    const size_t width = scale.size();
    for (size_t i = 0; i < x.size(); ++i) x[i] += scale[i % width] * y[i];
}

}  // namespace

void transformer(const Transformer& t, TransformerState& state, Signal& x, int64_t steps,
                 ThreadPool* pool) {
    const TransformerConfig& c = t.config;
    const int64_t dim = c.dim, width = c.attn_width(), half = c.head_dim / 2;
    if (steps == 0) return;

    std::vector<float> cos(static_cast<size_t>(steps * half)), sin(cos.size());
    for (int64_t s = 0; s < steps; ++s)
        rope_table_bf16(state.position + s, c.head_dim, c.rope_base, cos.data() + s * half, sin.data() + s * half);

    Signal normed(x.size()), attended(static_cast<size_t>(steps * width));
    for (size_t l = 0; l < t.layers.size(); ++l) {
        const TransformerLayer& layer = t.layers[l];
        cpu::rmsnorm(x.data(), layer.attention_norm.data(), steps, dim, c.norm_eps, normed.data(), pool);
        Signal qkv = linear(layer.wqkv, normed.data(), steps, pool);
        for (int64_t s = 0; s < steps; ++s)
            for (int64_t h = 0; h < 2 * c.n_head; ++h)  // the query heads, then the key heads
                rotate_pairs(qkv.data() + s * 3 * width + h * c.head_dim, half, cos.data() + s * half,
                             sin.data() + s * half);

        // The kept keys/values of the window, then this chunk's.
        std::vector<float>& keys = state.keys[l];
        std::vector<float>& values = state.values[l];
        for (int64_t s = 0; s < steps; ++s) {
            const float* row = qkv.data() + s * 3 * width;
            keys.insert(keys.end(), row + width, row + 2 * width);
            values.insert(values.end(), row + 2 * width, row + 3 * width);
        }
        const int64_t total = static_cast<int64_t>(keys.size()) / width;
        windowed_attention(qkv.data(), 3 * width, keys.data(), values.data(), total, steps, c.n_head, c.head_dim,
                           c.window, attended.data(), pool);
        const int64_t keep = std::min(total, c.window - 1);
        keys.erase(keys.begin(), keys.end() - keep * width);
        values.erase(values.begin(), values.end() - keep * width);

        add_scaled(x, linear(layer.wo, attended.data(), steps, pool), layer.attention_scale);

        cpu::rmsnorm(x.data(), layer.ffn_norm.data(), steps, dim, c.norm_eps, normed.data(), pool);
        Signal gate = linear(layer.w1, normed.data(), steps, pool);
        const Signal up = linear(layer.w3, normed.data(), steps, pool);
        for (size_t i = 0; i < gate.size(); ++i) gate[i] = cpu::silu(gate[i]) * up[i];
        add_scaled(x, linear(layer.w2, gate.data(), steps, pool), layer.ffn_scale);
    }
    cpu::rmsnorm(x.data(), t.norm.data(), steps, dim, c.norm_eps, normed.data(), pool);
    x.swap(normed);
    state.position += steps;
}

}  // namespace duet::fish_codec
