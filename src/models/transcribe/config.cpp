#include "models/transcribe/config.h"

#include <cmath>

#include "base/error.h"
#include "models/config_fields.h"

namespace duet::transcribe {

namespace {

const json::Value& object_at(const json::Value& parent, std::string_view key, std::string_view where) {
    const json::Value* v = parent.find(key);
    require(v != nullptr && v->is_object(), where, ": missing object '", key, "'");
    return *v;
}

std::string text_or(const ConfigFields& f, std::string_view key, const std::string& fallback) {
    const json::Value* v = f.find(key);
    return v == nullptr ? fallback : v->as_string(str_cat(f.source(), ": ", key));
}

audio::MelSettings read_mel(const json::Value& obj, const std::string& where) {
    const ConfigFields f(obj, where);
    audio::MelSettings s;
    s.sample_rate = f.int_or("sample_rate", 16000);
    require(s.sample_rate == 16000, where, ": sample_rate is ", s.sample_rate, ", expected 16000");
    s.n_fft = f.positive_int("n_fft");
    s.win_length = f.int_or("n_window_size", std::lround(f.number_or("window_size", 0.025) * s.sample_rate));
    s.hop = f.int_or("n_window_stride", std::lround(f.number_or("window_stride", 0.01) * s.sample_rate));
    s.n_mels = f.positive_int("features");
    s.pad_to = f.int_or("pad_to", 16);
    s.preemph = static_cast<float>(f.number_or("preemph", 0.97));
    s.log_guard = f.number_or("log_zero_guard_value", std::ldexp(1.0, -24));
    const std::string guard = text_or(f, "log_zero_guard_type", "add");
    require(guard == "add", where, ": log_zero_guard_type '", guard, "' is not supported (expected \"add\")");
    require(f.number_or("mag_power", 2.0) == 2.0, where, ": only mag_power 2 (the power spectrum) is supported");
    require(text_or(f, "mel_norm", "slaney") == "slaney", where, ": only mel_norm \"slaney\" is supported");
    require(f.int_or("frame_splicing", 1) == 1, where, ": only frame_splicing 1 is supported");
    return s;
}

EncoderConfig read_encoder(const json::Value& obj, const std::string& where) {
    const ConfigFields f(obj, where);
    EncoderConfig c;
    c.width = f.positive_int("d_model");
    c.layers = f.positive_int("n_layers");
    c.heads = f.positive_int("n_heads");
    c.ffn = std::lround(static_cast<double>(c.width) * f.number_or("ff_expansion", 4.0));
    c.feat_in = f.int_or("feat_in", 128);
    c.stacking = f.int_or("subsampling_factor", 8);
    c.qk_norm = f.bool_or("qk_norm", false);
    c.rotary_fraction = static_cast<float>(f.number_or("rotary_fraction", 1.0));
    c.rope_base = static_cast<float>(f.number_or("rope_base", 10000.0));
    c.norm_eps = static_cast<float>(f.number_or("layer_norm_eps", 1e-5));
    require(!f.bool_or("qkv_bias", false), where, ": qkv_bias true is not supported (the fused w_qkv has no bias)");
    const std::string subsampling = text_or(f, "subsampling", "feature_stacking");
    require(subsampling == "feature_stacking", where, ": subsampling '", subsampling,
            "' is not supported (expected feature_stacking)");
    const std::string attention = text_or(f, "self_attention_model", "rope");
    require(attention == "rope", where, ": self_attention_model '", attention, "' is not supported (expected rope)");
    const std::string activation = text_or(f, "activation", "gelu");
    require(activation.starts_with("gelu"), where, ": activation '", activation, "' is not supported (expected gelu)");
    return c;
}

void validate_encoder(const EncoderConfig& c, const std::string& where) {
    require(c.width > 0 && c.layers > 0 && c.heads > 0 && c.ffn > 0 && c.feat_in > 0 && c.stacking > 0, where,
            ": sizes must be positive");
    require(c.width % c.heads == 0, where, ": d_model ", c.width, " is not divisible by n_heads ", c.heads);
    require(c.rotary_fraction > 0.0f && c.rotary_fraction <= 1.0f, where, ": rotary_fraction ", c.rotary_fraction,
            " must be in (0, 1]");
    require(c.rotary_dim() % 2 == 0 && c.rotary_dim() > 0, where, ": rotary_fraction ", c.rotary_fraction,
            " of head_dim ", c.head_dim(), " does not give an even number of rotated values");
}

}  // namespace

int64_t EncoderConfig::rotary_dim() const {
    return static_cast<int64_t>(static_cast<double>(head_dim()) * rotary_fraction);
}

void PerceptionConfig::validate(std::string_view source) const {
    const std::string s(source);
    validate_encoder(asr, s + ": asr_encoder_cfg");
    validate_encoder(speaker, s + ": diarization_model_cfg.encoder");
    require(asr.feat_in == mel.n_mels && speaker.feat_in == mel.n_mels, s, ": encoders read ", asr.feat_in, " and ",
            speaker.feat_in, " mel bins but the preprocessor makes ", mel.n_mels);
    require(asr.stacking == speaker.stacking, s, ": the two encoders stack different frame counts (",
            asr.stacking, " and ", speaker.stacking, ")");
    require(sortformer.upsample == speaker.stacking, s, ": the Sortformer upsamples by ", sortformer.upsample,
            " but the speaker encoder stacks ", speaker.stacking, " frames");
    require(sortformer.speakers > 0 && sortformer.hidden > 0, s, ": sortformer_modules sizes must be positive");
    require(fusion.row_stride > 0 && fusion.row_offset >= 0, s, ": speaker kernel rows must be non-negative");
    require(asr.width % 2 == 0, s, ": the sinusoid speaker table needs an even ASR width, got ", asr.width);
    require(windows.window > 0 && windows.left_context >= 0 && windows.right_context >= 0, s,
            ": online_inference_length must be positive and the contexts non-negative");
    require(output_dim > 0, s, ": output_dim must be positive");
}

PerceptionConfig parse_perception_config(const json::Value& root, std::string_view source) {
    const std::string src(source);
    const json::Value& p = object_at(root, "perception", src);
    const std::string pw = src + ": perception";
    const json::Value& enc = object_at(p, "encoder", pw);
    const std::string ew = pw + ".encoder";
    const json::Value& diar = object_at(enc, "diarization_model_cfg", ew);
    const std::string dw = ew + ".diarization_model_cfg";

    PerceptionConfig c;
    c.mel = read_mel(object_at(p, "preprocessor", pw), pw + ".preprocessor");
    c.asr = read_encoder(object_at(enc, "asr_encoder_cfg", ew), ew + ".asr_encoder_cfg");
    c.speaker = read_encoder(object_at(diar, "encoder", dw), dw + ".encoder");

    const ConfigFields sf(object_at(diar, "sortformer_modules", dw), dw + ".sortformer_modules");
    c.sortformer.speakers = sf.positive_int("num_spks");
    c.sortformer.hidden = sf.positive_int("tf_d_model");
    c.sortformer.upsample = sf.int_or("upsample_factor", sf.int_or("subsampling_factor", 8));

    const ConfigFields ef(enc, ew);
    const std::string norm = text_or(ef, "asr_normalize_type", "per_feature");
    require(norm == "per_feature", ew, ": asr_normalize_type '", norm, "' is not supported (expected per_feature)");
    const std::string mode = text_or(ef, "speaker_feature_mode", "thresholded");
    require(mode == "thresholded", ew, ": speaker_feature_mode '", mode, "' is not supported (expected thresholded)");
    require(!ef.bool_or("spk_kernel_calibrate", false), ew, ": spk_kernel_calibrate true is not supported");
    c.sortformer.threshold = static_cast<float>(ef.number_or("speaker_activity_threshold", 0.5));
    c.fusion.kernel_scale = static_cast<float>(ef.number_or("spk_kernel_scale", 1.0));
    c.fusion.row_offset = ef.int_or("speaker_row_offset", 0);
    c.fusion.row_stride = ef.int_or("spk_kernel_row_stride", 1);
    c.windows.window = ef.int_or("online_inference_length", 500);
    c.windows.left_context = ef.int_or("chunk_left_context", 50);
    c.windows.right_context = ef.int_or("chunk_right_context", 50);

    c.output_dim = ConfigFields(p, pw).positive_int("output_dim");
    c.validate(src);
    return c;
}

PerceptionConfig load_perception_config(const std::string& path) {
    return parse_perception_config(json::parse_file(path), path);
}

int64_t audio_token_count(int64_t samples, const PerceptionConfig& config) {
    const int64_t frames = audio::valid_mel_frames(samples, config.mel.hop);
    return (frames + config.asr.stacking - 1) / config.asr.stacking;
}

}  // namespace duet::transcribe
