// Transcribe's audio path (the "perception"): 16 kHz samples → log-mel → the ASR encoder (on
// per-feature normalised mel) and the speaker encoder + Sortformer head (on raw mel) → speaker
// fusion → projector to the LM width. The LM receives one projected row per audio token, rounded to
// bf16 when it places them into its input embeddings.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "audio/log_mel.h"
#include "models/tensor_set.h"
#include "models/transcribe/config.h"
#include "models/transcribe/sortformer_head.h"
#include "models/transcribe/speaker_fusion.h"
#include "models/transcribe/speech_encoder.h"

namespace duet {
class ThreadPool;
}

namespace duet::transcribe {

// Wall time of each stage of one perceive() call, in seconds.
struct PerceptionTimings {
    double front_end = 0.0;       // log-mel and normalisation
    double asr_encoder = 0.0;
    double speaker_branch = 0.0;  // speaker encoder and Sortformer head
    double fusion = 0.0;          // fusion and projector
};

// Every stage of one perceive() call. Per-frame tensors have `encoder_frames` rows (the padded mel
// frames / stacking, so padding frames included); the LM uses the first `audio_tokens` rows.
struct PerceptionOutput {
    audio::LogMel mel_raw;         // [mel frames, n_mels], the speaker branch's input
    audio::LogMel mel_normalized;  // the ASR branch's input
    int64_t encoder_frames = 0;
    int64_t audio_tokens = 0;      // ceil(valid mel frames / stacking)
    int64_t windows = 1;           // encoder windows the audio needed
    std::vector<float> asr_hidden;      // [encoder_frames, asr width]
    std::vector<float> spk_probs_10ms;  // [encoder_frames · upsample, speakers]
    std::vector<float> spk_probs;       // [encoder_frames, speakers]
    std::vector<float> spk_active;      // [encoder_frames, speakers], 1 where active
    std::vector<float> fused;           // [encoder_frames, asr width]
    std::vector<float> projected;       // [encoder_frames, output_dim]
    int64_t output_dim = 0;
    PerceptionTimings seconds;

    // The rows that replace the <|audio|> positions: [audio_tokens, output_dim].
    std::span<const float> audio_embeddings() const {
        return {projected.data(), static_cast<size_t>(audio_tokens * output_dim)};
    }
};

struct PerceptionWeights {
    std::vector<float> window, filterbank;  // empty when the checkpoint has none
    EncoderWeights asr, speaker;
    SortformerHeadWeights head;
    FusionWeights fusion;
    LinearWeights proj;
    std::vector<std::shared_ptr<const void>> storage;  // whatever the views point into
};

class Perception {
public:
    // Reads `dir`/config.json (its `perception` object) and the perception.* tensors of the
    // checkpoint beside it.
    static Perception load(const std::string& dir);
    // Binds tensors held in memory (random weights for tests and benchmarks).
    static Perception from_tensors(const PerceptionConfig& config, std::shared_ptr<const TensorSet> tensors);

    const PerceptionConfig& config() const { return config_; }
    const PerceptionWeights& weights() const { return weights_; }
    size_t tensor_bytes() const { return tensor_bytes_; }

    // Audio tokens for `samples` samples: ceil(floor(samples / hop) / stacking).
    int64_t audio_tokens(int64_t samples) const { return audio_token_count(samples, config_); }

    // Runs the whole audio path on 16 kHz mono samples. Audio of more than one window
    // (config().windows.window audio tokens, 40 s) is encoded window by window.
    PerceptionOutput perceive(const std::vector<float>& waveform_16k, ThreadPool* pool = nullptr) const;

    // Runs the log-mel front end, both encoders' layers and every product around them (feature
    // stacking, the Sortformer head's, the projector) there from now on (null: on the CPU's threads
    // again); the small steps between the products (im2col, activations, the fusion's norms) stay
    // on the CPU.
    void run_on_device(std::shared_ptr<PerceptionDevice> device) { device_ = std::move(device); }

private:
    Perception(PerceptionConfig config, PerceptionWeights weights, size_t tensor_bytes);
    static Perception bind(const PerceptionConfig& config, const TensorLookup& lookup, const std::string& source,
                           size_t tensor_bytes, std::shared_ptr<const void> keep_alive);

    PerceptionConfig config_;
    PerceptionWeights weights_;
    audio::LogMelFrontEnd front_end_;
    size_t tensor_bytes_ = 0;
    std::shared_ptr<PerceptionDevice> device_;
};

// The checkpoint names of the perception's parts.
inline constexpr const char* kPreprocessorPrefix = "perception.preprocessor.featurizer.";
inline constexpr const char* kAsrEncoderPrefix = "perception.encoder.asr_encoder.";
inline constexpr const char* kSpeakerEncoderPrefix = "perception.encoder.diarization_model.encoder.";
inline constexpr const char* kSortformerPrefix = "perception.encoder.diarization_model.sortformer_modules.";
inline constexpr const char* kAsrNormName = "perception.encoder.asr_norm";
inline constexpr const char* kDiarNormName = "perception.encoder.diar_norm";
inline constexpr const char* kProjectorName = "perception.proj";

}  // namespace duet::transcribe
