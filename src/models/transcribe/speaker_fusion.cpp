#include "models/transcribe/speaker_fusion.h"

#include <cmath>

#include "kernels/cpu/layer_norm.h"

namespace duet::transcribe {

std::vector<float> speaker_kernel(int64_t speakers, int64_t width, const FusionConfig& config) {
    std::vector<float> k(static_cast<size_t>(speakers * width));
    for (int64_t i = 0; i < speakers; ++i) {
        const double position = static_cast<double>(config.row_offset + i * config.row_stride);
        for (int64_t j = 0; j < width / 2; ++j) {
            const double frequency = std::pow(10000.0, -2.0 * static_cast<double>(j) / static_cast<double>(width));
            k[i * width + 2 * j] = static_cast<float>(std::sin(position * frequency));
            k[i * width + 2 * j + 1] = static_cast<float>(std::cos(position * frequency));
        }
    }
    return k;
}

std::vector<float> fuse_speakers(const FusionWeights& w, const FusionConfig& config, const float* asr,
                                 const float* activity, int64_t frames, int64_t width, int64_t speakers,
                                 float norm_eps) {
    std::vector<float> fused(static_cast<size_t>(frames * width));
    std::vector<float> speaker_row(static_cast<size_t>(speakers));
    for (int64_t t = 0; t < frames; ++t) {
        float* out = fused.data() + t * width;
        cpu::layer_norm_row(asr + t * width, width, w.asr_norm.weight.data(), w.asr_norm.bias.data(), norm_eps, out);
        cpu::layer_norm_row(activity + t * speakers, speakers, w.diar_norm.weight.data(), w.diar_norm.bias.data(),
                            norm_eps, speaker_row.data());
        for (int64_t i = 0; i < speakers; ++i) {
            const float a = config.kernel_scale * speaker_row[i];
            const float* k = w.kernel.data() + i * width;
            for (int64_t d = 0; d < width; ++d) out[d] += a * k[d];
        }
    }
    return fused;
}

}  // namespace duet::transcribe
