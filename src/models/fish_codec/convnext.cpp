// ConvNeXt block of the quantizer's up/downsampling: depthwise causal conv (kernel 7) → LayerNorm →
// Linear (4×) → GELU → Linear → per-channel scale γ, added to the input.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/fish_codec/layers.h"

namespace duet::fish_codec {

namespace {

constexpr float kLayerNormEps = 1e-6f;

// PyTorch's exact (erf) GELU.
float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

// out[t, c] = bias[c] + Σₖ w[k, c] · padded[t + k, c], with the history in front of x.
Signal depthwise_causal_conv(const DepthwiseConv& conv, ConvState& state, const float* x, int64_t steps,
                                         ThreadPool* pool) {
    const int64_t c_dim = conv.channels, context = conv.kernel - 1;
    // Padded row r: the history's row r below `context`, else input step r - context.
    const auto padded_row = [&](int64_t r) { return r < context ? state.history.data() + r * c_dim : x + (r - context) * c_dim; };
    Signal out(static_cast<size_t>(steps * c_dim));
    parallel_for(pool, steps, std::max<int64_t>(1, 8192 / (c_dim * conv.kernel)), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
            float* dst = out.data() + t * c_dim;
            std::copy(conv.bias.begin(), conv.bias.end(), dst);
            for (int64_t k = 0; k < conv.kernel; ++k) {
                const float* w = conv.weight.data() + k * c_dim;
                const float* src = padded_row(t + k);
                for (int64_t c = 0; c < c_dim; ++c) dst[c] += w[c] * src[c];
            }
        }
    });
    keep_last_rows(state.history, context, x, steps, c_dim);
    return out;
}

void layer_norm_rows(float* x, int64_t steps, const std::vector<float>& weight, const std::vector<float>& bias,
                     ThreadPool* pool) {
    const int64_t c_dim = static_cast<int64_t>(weight.size());
    parallel_for(pool, steps, std::max<int64_t>(1, 4096 / c_dim), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
            float* row = x + t * c_dim;
            double sum = 0.0;
            for (int64_t c = 0; c < c_dim; ++c) sum += row[c];
            const float mean = static_cast<float>(sum / static_cast<double>(c_dim));
            double squares = 0.0;
            for (int64_t c = 0; c < c_dim; ++c) squares += static_cast<double>(row[c] - mean) * (row[c] - mean);
            const float inv_std = 1.0f / std::sqrt(static_cast<float>(squares / static_cast<double>(c_dim)) + kLayerNormEps);
            for (int64_t c = 0; c < c_dim; ++c) row[c] = (row[c] - mean) * inv_std * weight[static_cast<size_t>(c)] + bias[static_cast<size_t>(c)];
        }
    });
}

}  // namespace

ConvState new_state(const DepthwiseConv& conv) {
    return {std::vector<float>(static_cast<size_t>((conv.kernel - 1) * conv.channels), 0.0f)};
}

ConvNeXtState new_state(const ConvNeXt& block) { return {new_state(block.dwconv)}; }

void convnext(const ConvNeXt& block, ConvNeXtState& state, Signal& x, int64_t steps, ThreadPool* pool) {
    Signal y = depthwise_causal_conv(block.dwconv, state.dwconv, x.data(), steps, pool);
    layer_norm_rows(y.data(), steps, block.norm_weight, block.norm_bias, pool);
    Signal hidden = linear(block.pwconv1, y.data(), steps, pool);
    parallel_for(pool, static_cast<int64_t>(hidden.size()), 16384, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hidden[static_cast<size_t>(i)] = gelu(hidden[static_cast<size_t>(i)]);
    });
    y = linear(block.pwconv2, hidden.data(), steps, pool);
    const int64_t c_dim = block.pwconv2.out;
    parallel_for(pool, steps, std::max<int64_t>(1, 16384 / c_dim), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t)
            for (int64_t c = 0; c < c_dim; ++c)
                x[static_cast<size_t>(t * c_dim + c)] += block.gamma[static_cast<size_t>(c)] * y[static_cast<size_t>(t * c_dim + c)];
    });
}

}  // namespace duet::fish_codec
