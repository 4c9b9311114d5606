// Fusion of the speaker branch into the ASR states (NVIDIA's ParallelExpertEncoder):
//   fused = kernel_scale · (LN_diar(active) · K) + LN_asr(asr)
// with K the fixed sinusoid table that gives each speaker slot its own direction in the ASR width.
#pragma once

#include <cstdint>
#include <vector>

#include "models/transcribe/config.h"
#include "models/transcribe/speech_encoder.h"

namespace duet::transcribe {

// [speakers, width]: row i is the sin/cos position encoding of position row_offset + i · row_stride,
// sin in even dims, cos in odd, frequency of pair j 10000^(−2j / width).
std::vector<float> speaker_kernel(int64_t speakers, int64_t width, const FusionConfig& config);

struct FusionWeights {
    LayerNormWeights asr_norm;   // asr_norm [asr width]
    LayerNormWeights diar_norm;  // diar_norm [speakers]
    std::vector<float> kernel;   // speaker_kernel(...)
};

// [frames, width] from the ASR states [frames, width] and speaker activity [frames, speakers].
std::vector<float> fuse_speakers(const FusionWeights& weights, const FusionConfig& config, const float* asr,
                                 const float* activity, int64_t frames, int64_t width, int64_t speakers,
                                 float norm_eps);

}  // namespace duet::transcribe
