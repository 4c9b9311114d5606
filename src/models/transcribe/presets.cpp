#include "models/transcribe/presets.h"

#include <cmath>
#include <string>

#include "base/error.h"
#include "models/random_tensors.h"
#include "models/transcribe/perception.h"

namespace duet::transcribe {

namespace {

EncoderConfig encoder(int64_t width, int64_t layers, int64_t heads, bool qk_norm, float rotary_fraction) {
    EncoderConfig c;
    c.width = width;
    c.layers = layers;
    c.heads = heads;
    c.ffn = 4 * width;
    c.qk_norm = qk_norm;
    c.rotary_fraction = rotary_fraction;
    return c;
}

PerceptionConfig tiny() {
    PerceptionConfig c;
    c.asr = encoder(64, 2, 4, true, 0.5f);
    c.speaker = encoder(32, 2, 2, false, 1.0f);
    c.sortformer.speakers = 4;
    c.sortformer.hidden = 24;
    c.fusion.kernel_scale = 0.75f;
    c.output_dim = 48;
    return c;
}

// The spec gives the ASR encoder's width (1280), depth (32), q/k norm and half-head RoPE, and the
// speaker encoder's 512 × 31 layers × 8 heads. ASSUMED: 20 ASR heads of 64, a Sortformer of 8
// speakers × 192 as in Nemotron-3-Diarization, the LM width of Nemotron 3 Nano (2688).
PerceptionConfig real() {
    PerceptionConfig c;
    c.asr = encoder(1280, 32, 20, true, 0.5f);
    c.speaker = encoder(512, 31, 8, false, 1.0f);
    c.sortformer.speakers = 8;
    c.sortformer.hidden = 192;
    c.fusion.kernel_scale = 0.75f;
    c.output_dim = 2688;
    return c;
}

void random_encoder(RandomTensorWriter& g, const EncoderConfig& c, const std::string& prefix) {
    const auto norm = [&](const std::string& name, int64_t width) {
        g.uniform(name + ".weight", {width}, 0.9f, 1.1f);
        g.uniform(name + ".bias", {width}, -0.1f, 0.1f);
    };
    g.matrix(prefix + "pre_encode.proj.weight", {c.width, c.stacking * c.feat_in});
    norm(prefix + "embed_norm", c.width);
    for (int64_t i = 0; i < c.layers; ++i) {
        const std::string p = prefix + "layers." + std::to_string(i) + ".";
        norm(p + "norm1", c.width);
        norm(p + "norm2", c.width);
        g.matrix(p + "attn.w_qkv.weight", {3 * c.width, c.width});
        if (c.qk_norm) {
            norm(p + "attn.q_norm", c.head_dim());
            norm(p + "attn.k_norm", c.head_dim());
        }
        g.matrix(p + "attn.out_proj.weight", {c.width, c.width});
        g.uniform(p + "attn.out_proj.bias", {c.width}, -0.05f, 0.05f);
        g.matrix(p + "ffn.net.0.weight", {c.ffn, c.width});
        g.uniform(p + "ffn.net.0.bias", {c.ffn}, -0.05f, 0.05f);
        g.matrix(p + "ffn.net.3.weight", {c.width, c.ffn});
        g.uniform(p + "ffn.net.3.bias", {c.width}, -0.05f, 0.05f);
    }
    norm(prefix + "final_norm", c.width);
}

}  // namespace

std::vector<std::string_view> perception_preset_names() { return {"tiny", "real"}; }

PerceptionConfig perception_preset(std::string_view name) {
    PerceptionConfig c;
    if (name == "tiny") {
        c = tiny();
    } else if (name == "real") {
        c = real();
    } else {
        std::string known;
        for (std::string_view n : perception_preset_names()) known += (known.empty() ? "" : ", ") + std::string(n);
        fail("unknown transcribe preset '", name, "' (known: ", known, ")");
    }
    c.validate(str_cat("preset ", name));
    return c;
}

size_t random_perception_weight_bytes(const PerceptionConfig& c) {
    const auto encoder_params = [](const EncoderConfig& e) {
        const int64_t per_layer = 4 * e.width * e.width + 2 * e.width * e.ffn + e.ffn + 6 * e.width +
                                  (e.qk_norm ? 4 * e.head_dim() : 0);
        return e.width * e.stacking * e.feat_in + 4 * e.width + e.layers * per_layer;
    };
    const int64_t h = c.sortformer.hidden, r = c.sortformer.upsample, k = c.sortformer.speakers;
    const int64_t head = h * (c.speaker.width + 1) + r * h * (3 * h + 1) + h * (h + 1) + k * (h + 1) + c.speaker.width;
    const int64_t rest = 2 * c.asr.width + 2 * k + c.output_dim * (c.asr.width + 1);
    return static_cast<size_t>(2 * (encoder_params(c.asr) + encoder_params(c.speaker) + head + rest));
}

std::shared_ptr<TensorSet> make_random_perception_weights(const PerceptionConfig& c, uint64_t seed, ThreadPool* pool) {
    auto set = std::make_shared<TensorSet>();
    RandomTensorWriter g(*set, seed, pool);
    random_encoder(g, c.asr, kAsrEncoderPrefix);
    random_encoder(g, c.speaker, kSpeakerEncoderPrefix);

    const std::string s = kSortformerPrefix;
    const int64_t h = c.sortformer.hidden, r = c.sortformer.upsample;
    g.matrix(s + "encoder_proj.weight", {h, c.speaker.width});
    g.uniform(s + "encoder_proj.bias", {h}, -0.05f, 0.05f);
    const float conv_bound = std::sqrt(1.0f / static_cast<float>(h));  // fan-in 3·h
    g.uniform(s + "subpixel_upsample.weight", {r * h, h, 3}, -conv_bound, conv_bound);
    g.uniform(s + "subpixel_upsample.bias", {r * h}, -0.05f, 0.05f);
    g.matrix(s + "first_hidden_to_hidden.weight", {h, h});
    g.uniform(s + "first_hidden_to_hidden.bias", {h}, -0.05f, 0.05f);
    g.matrix(s + "single_hidden_to_spks.weight", {c.sortformer.speakers, h});
    g.uniform(s + "single_hidden_to_spks.bias", {c.sortformer.speakers}, -0.5f, 0.5f);
    g.uniform(s + "learnable_sil_emb", {c.speaker.width}, -0.1f, 0.1f);

    g.uniform(std::string(kAsrNormName) + ".weight", {c.asr.width}, 0.9f, 1.1f);
    g.uniform(std::string(kAsrNormName) + ".bias", {c.asr.width}, -0.1f, 0.1f);
    g.uniform(std::string(kDiarNormName) + ".weight", {c.sortformer.speakers}, 0.9f, 1.1f);
    g.uniform(std::string(kDiarNormName) + ".bias", {c.sortformer.speakers}, -0.1f, 0.1f);
    g.matrix(std::string(kProjectorName) + ".weight", {c.output_dim, c.asr.width});
    g.uniform(std::string(kProjectorName) + ".bias", {c.output_dim}, -0.05f, 0.05f);
    return set;
}

}  // namespace duet::transcribe
