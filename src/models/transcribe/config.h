// Hyper-parameters of Transcribe's audio path (the "perception"), read from the NeMo-style
// `perception` object of config.json: the mel front end, the ASR and speaker encoders, the
// Sortformer head, the speaker fusion and the projector to the LM width.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "audio/log_mel.h"
#include "base/json.h"

namespace duet::transcribe {

// One NemotronSpeechEncoder: feature stacking, pre-LN Transformer layers with RoPE, final norm.
struct EncoderConfig {
    int64_t width = 0;
    int64_t layers = 0;
    int64_t heads = 0;
    int64_t ffn = 0;          // d_model · ff_expansion
    int64_t feat_in = 128;    // mel bins
    int64_t stacking = 8;     // mel frames per encoder frame
    bool qk_norm = false;
    float rotary_fraction = 1.0f;
    float rope_base = 10000.0f;
    float norm_eps = 1e-5f;

    int64_t head_dim() const { return width / heads; }
    // RoPE rotates this many leading values of each head (an even number).
    int64_t rotary_dim() const;
};

struct SortformerConfig {
    int64_t speakers = 0;       // num_spks
    int64_t hidden = 0;         // tf_d_model
    int64_t upsample = 8;       // 10 ms rows per encoder frame
    float threshold = 0.5f;     // speaker active when p > threshold
};

struct FusionConfig {
    float kernel_scale = 1.0f;  // spk_kernel_scale
    int64_t row_offset = 0;     // speaker_row_offset
    int64_t row_stride = 1;     // spk_kernel_row_stride
};

// Long audio is encoded in windows of `window` encoder frames with `context` frames each side.
struct WindowConfig {
    int64_t window = 500;
    int64_t left_context = 50;
    int64_t right_context = 50;
};

struct PerceptionConfig {
    audio::MelSettings mel;
    EncoderConfig asr;
    EncoderConfig speaker;
    SortformerConfig sortformer;
    FusionConfig fusion;
    WindowConfig windows;
    int64_t output_dim = 0;  // the LM's hidden width

    // Checks sizes and ratios; throws naming `source` and the field.
    void validate(std::string_view source) const;
};

// Reads root["perception"]; `source` names the file in errors.
PerceptionConfig parse_perception_config(const json::Value& root, std::string_view source);
PerceptionConfig load_perception_config(const std::string& path);

// Audio tokens the LM receives for `samples` samples at 16 kHz: ceil(floor(samples / hop) / stacking).
int64_t audio_token_count(int64_t samples, const PerceptionConfig& config);

}  // namespace duet::transcribe
