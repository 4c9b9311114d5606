// NemotronSpeechEncoder, the network of both of Transcribe's encoders: stack `stacking` mel frames
// into one vector and project it (pre_encode.proj, no bias), embed_norm, pre-LN Transformer layers
// (x += out_proj(Attn(norm1(x))), x += net.3(gelu(net.0(norm2(x))))), final_norm. Attention is
// bidirectional over the valid frames, with optional per-head LayerNorm on q and k before a
// rotate-half RoPE on the leading rotary_dim values of each head.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "audio/log_mel.h"
#include "models/transcribe/config.h"
#include "models/weight_binder.h"

namespace duet {
class ThreadPool;
}

namespace duet::transcribe {

struct LayerNormWeights {
    std::vector<float> weight, bias;
};

struct LinearWeights {
    MatrixView weight;  // [out, in]
    std::vector<float> bias;  // empty when the layer has none
};

struct EncoderLayerWeights {
    LayerNormWeights norm1, norm2;
    MatrixView qkv;  // [q | k | v] rows, no bias
    LayerNormWeights q_norm, k_norm;  // per head, when qk_norm
    LinearWeights out_proj;
    LinearWeights ffn_up, ffn_down;  // ffn.net.0, ffn.net.3
};

struct EncoderWeights {
    MatrixView pre_encode;  // [width, stacking · feat_in]
    LayerNormWeights embed_norm, final_norm;
    std::vector<EncoderLayerWeights> layers;
};

// Where the audio path's heavy parts run: embed_norm, the layers and final_norm of an encoder
// (encode_projected's work), the products around them (feature stacking, the Sortformer head's, the
// projector) and the log-mel front end; the CPU's threads unless a form for another device is given
// (backend/cuda/cuda_speech_encoder.h).
class PerceptionDevice {
public:
    virtual ~PerceptionDevice() = default;
    // encode_projected's contract: x [n, width] in place, every frame attending to the first `keys`.
    virtual void run(const EncoderConfig& config, const EncoderWeights& weights, std::vector<float>& x, int64_t n,
                     int64_t keys) = 0;
    // linear()'s contract on host arrays: out [n, w.weight.rows] = x [n, w.weight.cols] · Wᵀ + bias.
    virtual void linear(const LinearWeights& w, const float* x, int64_t n, float* out) = 0;
    // front_end.compute() and audio::normalize_per_feature() of 16 kHz mono samples.
    virtual audio::LogMelForms log_mel(const audio::LogMelFrontEnd& front_end, const std::vector<float>& waveform) = 0;
};

// The rotary tables of positions 0 … n−1, [n, rotary_dim / 2] each, as both forms of the layers use them.
struct RopeTables {
    RopeTables(const EncoderConfig& config, int64_t n);
    int64_t half;
    std::vector<float> cos, sin;
};

// `prefix` ends with a dot, e.g. "perception.encoder.asr_encoder.".
EncoderWeights bind_encoder(const EncoderConfig& config, WeightBinder& binder, const std::string& prefix);

// Encodes mel rows [mel_frames, feat_in] of which the first `valid_mel` hold audio (the rest are
// treated as zeros). Returns [ceil(mel_frames / stacking), width]; frames past
// ceil(valid_mel / stacking) are computed too but attend only to the valid ones.
// `device`, when given, runs the products and the layers instead of the CPU.
std::vector<float> encode(const EncoderConfig& config, const EncoderWeights& weights, const float* mel,
                          int64_t mel_frames, int64_t valid_mel, ThreadPool* pool, PerceptionDevice* device = nullptr);

// The two halves of encode(), for the streaming speaker branch, which caches projected frames.
// Feature stacking and pre_encode.proj: [ceil(mel_frames / stacking), width].
std::vector<float> stack_and_project(const EncoderConfig& config, const EncoderWeights& weights, const float* mel,
                                     int64_t mel_frames, int64_t valid_mel, ThreadPool* pool,
                                     PerceptionDevice* device = nullptr);
// embed_norm, the layers and final_norm over n projected frames, in place; every frame attends to
// the first `keys` frames.
void encode_projected(const EncoderConfig& config, const EncoderWeights& weights, std::vector<float>& x, int64_t n,
                      int64_t keys, ThreadPool* pool, PerceptionDevice* device = nullptr);

// Shared by the encoders, the Sortformer head and the fusion: out [n, rows] = x [n, cols] · Wᵀ + bias,
// on `device` when given, else on the CPU's threads.
void linear(const LinearWeights& w, const float* x, int64_t n, float* out, ThreadPool* pool,
            PerceptionDevice* device = nullptr);
LayerNormWeights bind_layer_norm(WeightBinder& binder, const std::string& name, int64_t width);
LinearWeights bind_linear(WeightBinder& binder, const std::string& name, int64_t out, int64_t in, bool bias);

}  // namespace duet::transcribe
