// The high-resolution Sortformer head of the speaker branch: encoder_proj, a sub-pixel 1-D
// convolution (kernel 3) that turns each encoder frame into `upsample` 10 ms rows, ReLU,
// first_hidden_to_hidden, ReLU, single_hidden_to_spks, sigmoid. The 80 ms speaker probability is the
// mean of a frame's 10 ms values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/transcribe/config.h"
#include "models/transcribe/speech_encoder.h"

namespace duet::transcribe {

struct SortformerHeadWeights {
    LinearWeights encoder_proj;     // [hidden, speaker width]
    std::vector<float> upsample_taps;  // as im2col weights: [upsample · hidden, 3 · hidden]
    std::vector<float> upsample_bias;  // [upsample · hidden]
    LinearWeights hidden_to_hidden;  // first_hidden_to_hidden
    LinearWeights hidden_to_speakers;  // single_hidden_to_spks
    std::vector<float> silence_embedding;  // learnable_sil_emb [speaker width], for the speaker cache
};

// `prefix` ends with a dot, e.g. "perception.encoder.diarization_model.sortformer_modules.".
SortformerHeadWeights bind_sortformer_head(const SortformerConfig& config, int64_t encoder_width, WeightBinder& binder,
                                           const std::string& prefix);

// 10 ms speaker probabilities [frames · upsample, speakers] from speaker-encoder states
// [frames, encoder_width]. Every frame goes through the convolution (padding frames included, as
// NeMo's offline inference runs it); rows of frames >= valid_frames are then set to 0.
std::vector<float> sortformer_probs_10ms(const SortformerConfig& config, const SortformerHeadWeights& weights,
                                         const float* encoded, int64_t frames, int64_t valid_frames, ThreadPool* pool,
                                         PerceptionDevice* device = nullptr);

// The mean of each frame's `upsample` 10 ms rows: [frames, speakers].
std::vector<float> average_per_frame(const SortformerConfig& config, const std::vector<float>& probs_10ms,
                                     int64_t frames);

// 1 where p > threshold, else 0.
std::vector<float> speaker_activity(const SortformerConfig& config, const std::vector<float>& probs);

}  // namespace duet::transcribe
