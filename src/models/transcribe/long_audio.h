// Encoding audio window by window. Audio of at most one window (500 encoder frames, 40 s) is encoded
// in one pass. Longer audio is cut into windows of that many frames, each encoded with `context`
// frames of audio on either side that are then dropped: the ASR branch encodes each window of the
// utterance's normalised mel on its own; the speaker branch runs the windows in order, carrying its
// speaker cache from one to the next.
#pragma once

#include <cstdint>
#include <vector>

#include "audio/log_mel.h"
#include "models/transcribe/config.h"
#include "models/transcribe/sortformer_head.h"
#include "models/transcribe/speech_encoder.h"

namespace duet {
class ThreadPool;
}

namespace duet::transcribe {

struct EncoderWindow {
    int64_t begin = 0, end = 0;                  // the encoder frames this window produces
    int64_t context_begin = 0, context_end = 0;  // the frames it is encoded with
};

struct EncodingPlan {
    int64_t frames = 0;  // encoder frames of the whole (padded) utterance
    std::vector<EncoderWindow> windows;
};

// One window when audio_tokens <= config.window; otherwise ceil(audio_tokens / window) windows, the
// last running to the end of the padded frames.
EncodingPlan plan_windows(const WindowConfig& config, int64_t audio_tokens, int64_t frames);

// ASR encoder states [plan.frames, asr width] from the normalised mel.
std::vector<float> encode_asr_branch(const PerceptionConfig& config, const EncoderWeights& weights,
                                     const audio::LogMel& normalized, const EncodingPlan& plan, ThreadPool* pool,
                                     PerceptionDevice* device = nullptr);

// Sortformer 10 ms probabilities [plan.frames · upsample, speakers] from the raw mel; rows past the
// audio tokens are 0.
std::vector<float> speaker_branch_probs_10ms(const PerceptionConfig& config, const EncoderWeights& encoder,
                                             const SortformerHeadWeights& head, const audio::LogMel& raw,
                                             const EncodingPlan& plan, ThreadPool* pool,
                                             PerceptionDevice* device = nullptr);

}  // namespace duet::transcribe
