#include "models/transcribe/sortformer_head.h"

#include <algorithm>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/matmul.h"

namespace duet::transcribe {

namespace {

constexpr int64_t kUpsampleKernel = 3;  // padding 1: output t reads inputs t−1, t, t+1

// The sub-pixel shuffle: conv output channel `channel` of frame t becomes hidden value c of the
// 10 ms row t·upsample + s, with channel = s·hidden + c (each 10 ms row is one contiguous block).
int64_t subpixel_channel(int64_t s, int64_t c, int64_t hidden) { return s * hidden + c; }

}  // namespace

SortformerHeadWeights bind_sortformer_head(const SortformerConfig& c, int64_t encoder_width, WeightBinder& binder,
                                           const std::string& prefix) {
    SortformerHeadWeights w;
    const int64_t h = c.hidden, out_channels = c.upsample * h;
    w.encoder_proj = bind_linear(binder, prefix + "encoder_proj", h, encoder_width, true);
    // Conv1d weight [out, in, kernel] reordered for one matmul over im2col rows [kernel · in].
    const std::vector<float> conv = binder.vector({prefix + "subpixel_upsample.weight"}, {out_channels, h, kUpsampleKernel});
    w.upsample_bias = binder.vector({prefix + "subpixel_upsample.bias"}, {out_channels});
    if (!conv.empty()) {
        w.upsample_taps.resize(static_cast<size_t>(out_channels * kUpsampleKernel * h));
        for (int64_t o = 0; o < out_channels; ++o) {
            for (int64_t i = 0; i < h; ++i) {
                for (int64_t k = 0; k < kUpsampleKernel; ++k) {
                    w.upsample_taps[(o * kUpsampleKernel + k) * h + i] = conv[(o * h + i) * kUpsampleKernel + k];
                }
            }
        }
    }
    w.hidden_to_hidden = bind_linear(binder, prefix + "first_hidden_to_hidden", h, h, true);
    w.hidden_to_speakers = bind_linear(binder, prefix + "single_hidden_to_spks", c.speakers, h, true);
    w.silence_embedding = binder.vector({prefix + "learnable_sil_emb"}, {encoder_width});
    return w;
}

std::vector<float> sortformer_probs_10ms(const SortformerConfig& c, const SortformerHeadWeights& w,
                                         const float* encoded, int64_t frames, int64_t valid_frames,
                                         ThreadPool* pool, PerceptionDevice* device) {
    const int64_t h = c.hidden, r = c.upsample, out_channels = r * h;
    std::vector<float> projected(static_cast<size_t>(frames * h));
    linear(w.encoder_proj, encoded, frames, projected.data(), pool, device);

    // im2col: row t holds frames t−1, t, t+1 (zeros beyond either end).
    std::vector<float> windows(static_cast<size_t>(frames * kUpsampleKernel * h), 0.0f);
    for (int64_t t = 0; t < frames; ++t) {
        for (int64_t k = 0; k < kUpsampleKernel; ++k) {
            const int64_t src = t + k - 1;
            if (src < 0 || src >= frames) continue;
            std::copy_n(projected.data() + src * h, h, windows.data() + (t * kUpsampleKernel + k) * h);
        }
    }
    std::vector<float> conv(static_cast<size_t>(frames * out_channels));
    const MatrixView taps{DType::F32, out_channels, kUpsampleKernel * h, w.upsample_taps.data()};
    linear(LinearWeights{taps, {}}, windows.data(), frames, conv.data(), pool, device);

    std::vector<float> rows(static_cast<size_t>(frames * r * h));
    for (int64_t t = 0; t < frames; ++t) {
        for (int64_t s = 0; s < r; ++s) {
            for (int64_t i = 0; i < h; ++i) {
                const int64_t channel = subpixel_channel(s, i, h);
                const float v = conv[t * out_channels + channel] + w.upsample_bias[channel];
                rows[(t * r + s) * h + i] = std::max(v, 0.0f);
            }
        }
    }
    std::vector<float> hidden(rows.size());
    linear(w.hidden_to_hidden, rows.data(), frames * r, hidden.data(), pool, device);
    for (float& v : hidden) v = std::max(v, 0.0f);
    std::vector<float> probs(static_cast<size_t>(frames * r * c.speakers));
    linear(w.hidden_to_speakers, hidden.data(), frames * r, probs.data(), pool, device);
    for (float& v : probs) v = cpu::sigmoid(v);
    std::fill(probs.begin() + std::min(valid_frames, frames) * r * c.speakers, probs.end(), 0.0f);
    return probs;
}

std::vector<float> average_per_frame(const SortformerConfig& c, const std::vector<float>& probs_10ms, int64_t frames) {
    std::vector<float> out(static_cast<size_t>(frames * c.speakers), 0.0f);
    for (int64_t t = 0; t < frames; ++t) {
        for (int64_t k = 0; k < c.speakers; ++k) {
            float sum = 0.0f;
            for (int64_t s = 0; s < c.upsample; ++s) sum += probs_10ms[(t * c.upsample + s) * c.speakers + k];
            out[t * c.speakers + k] = sum / static_cast<float>(c.upsample);
        }
    }
    return out;
}

std::vector<float> speaker_activity(const SortformerConfig& c, const std::vector<float>& probs) {
    std::vector<float> active(probs.size());
    for (size_t i = 0; i < probs.size(); ++i) active[i] = probs[i] > c.threshold ? 1.0f : 0.0f;
    return active;
}

}  // namespace duet::transcribe
