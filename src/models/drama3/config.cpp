#include "models/drama3/config.h"

#include "base/error.h"
#include "models/config_fields.h"

namespace duet::drama3 {

text::Drama3Vocabulary Config::vocabulary() const {
    text::Drama3Vocabulary v;
    v.semantic_start = static_cast<int32_t>(semantic_start);
    v.semantic_end = static_cast<int32_t>(semantic_end);
    v.num_codebooks = static_cast<int>(tower.num_codebooks);
    v.codebook_size = static_cast<int>(tower.codebook_size);
    return v;
}

int64_t Config::parameter_count() const {
    const TowerConfig& t = tower;
    const int64_t attention = 2 * t.heads * t.head_dim * t.dim + 2 * t.kv_heads * t.head_dim * t.dim +
                              t.dim * t.heads * t.head_dim + 2 * t.head_dim;
    const int64_t layer = t.codebook_size * t.dim + 2 * t.dim * t.dim + 5 * t.dim + attention + 3 * t.inter * t.dim;
    const int64_t heads = (t.num_codebooks - 1) * t.codebook_size * t.dim;
    return backbone.parameter_count() + t.num_codebooks * t.codebook_size * t.dim + t.layers() * layer + heads;
}

void Config::validate(std::string_view source) const {
    backbone.validate(source);
    const TowerConfig& t = tower;
    require(t.dim == backbone.hidden, source, ": audio_decoder_config.dim is ", t.dim,
            ", expected the backbone's hidden_size ", backbone.hidden);
    require(t.heads % t.kv_heads == 0, source, ": audio_decoder_config.n_head ", t.heads,
            " is not a multiple of n_local_heads ", t.kv_heads);
    require(t.num_codebooks >= 2, source, ": audio_decoder_config.num_codebooks is ", t.num_codebooks,
            ", expected at least 2 (the semantic codebook and a residual one)");
    require(t.backbone_codebooks >= 1 && t.backbone_codebooks <= t.num_codebooks, source,
            ": audio_decoder_config.vq_backbone_codebooks is ", t.backbone_codebooks, ", expected 1..", t.num_codebooks);
    require(t.rotary_dim() % 2 == 0 && t.rotary_dim() <= t.head_dim, source,
            ": audio_decoder_config.rotary_percent gives ", t.rotary_dim(), " rotated dims of ", t.head_dim,
            ", expected an even number at most head_dim");
    require(semantic_start >= 0 && semantic_end >= semantic_start && semantic_end < backbone.vocab, source,
            ": semantic tokens ", semantic_start, "..", semantic_end, " do not fit the vocabulary of ", backbone.vocab);
    require(semantic_count() <= t.codebook_size, source, ": ", semantic_count(),
            " semantic tokens but the codebooks hold ", t.codebook_size, " codes (audio_decoder_config.vocab_size)");
    require(eos >= 0 && eos < backbone.vocab && (eos < semantic_start || eos > semantic_end), source, ": eos_token_id ",
            eos, " must be a vocabulary token outside the semantic range");
}

Config parse_config(const json::Value& root, std::string_view source) {
    require(root.is_object(), source, ": expected a JSON object");
    Config c;
    c.backbone = qwen35_moe::parse_config(root, source);
    const ConfigFields top(root, std::string(source));
    c.semantic_start = top.int_or("semantic_start_token_id", -1);
    c.semantic_end = top.int_or("semantic_end_token_id", -1);
    c.eos = top.int_or("eos_token_id", -1);
    const json::Value* audio = top.find("audio_decoder_config");
    require(audio != nullptr && audio->is_object(), source, ": missing audio_decoder_config (expected a Drama 3 config)");
    const ConfigFields f(*audio, str_cat(source, ": audio_decoder_config"));
    TowerConfig& t = c.tower;
    t.dim = f.positive_int("dim");
    t.heads = f.positive_int("n_head");
    t.kv_heads = f.int_or("n_local_heads", t.heads);
    t.head_dim = f.int_or("head_dim", t.dim / t.heads);
    t.inter = f.positive_int("intermediate_size");
    t.norm_eps = static_cast<float>(f.number_or("norm_eps", 1e-6));
    t.num_codebooks = f.positive_int("num_codebooks");
    t.codebook_size = f.positive_int("vocab_size");
    t.shared_layers = f.int_or("shared_enrichment_layers", 4);
    t.rope_theta = f.number_or("rope_base", 1e7);
    t.rotary_fraction = f.number_or("rotary_percent", 1.0);
    t.backbone_codebooks = f.int_or("vq_backbone_codebooks", t.num_codebooks);
    require(t.kv_heads > 0 && t.head_dim > 0 && t.shared_layers >= 0, f.source(),
            ": n_local_heads, head_dim must be positive and shared_enrichment_layers not negative");
    c.validate(source);
    return c;
}

Config load_config(const std::string& path) { return parse_config(json::parse_file(path), path); }

json::Value config_to_json(const Config& c) {
    json::Value j = json::Value::object();
    j.set("model_type", json::Value("fish_omni"));
    j.set("semantic_start_token_id", json::Value(c.semantic_start));
    j.set("semantic_end_token_id", json::Value(c.semantic_end));
    j.set("eos_token_id", json::Value(c.eos));
    j.set("text_config", qwen35_moe::config_to_json(c.backbone));
    const TowerConfig& t = c.tower;
    json::Value a = json::Value::object();
    a.set("dim", json::Value(t.dim));
    a.set("n_head", json::Value(t.heads));
    a.set("n_local_heads", json::Value(t.kv_heads));
    a.set("head_dim", json::Value(t.head_dim));
    a.set("intermediate_size", json::Value(t.inter));
    a.set("norm_eps", json::Value(static_cast<double>(t.norm_eps)));
    a.set("num_codebooks", json::Value(t.num_codebooks));
    a.set("vocab_size", json::Value(t.codebook_size));
    a.set("shared_enrichment_layers", json::Value(t.shared_layers));
    a.set("rope_base", json::Value(t.rope_theta));
    a.set("rotary_percent", json::Value(t.rotary_fraction));
    a.set("vq_backbone_codebooks", json::Value(t.backbone_codebooks));
    j.set("audio_decoder_config", a);
    return j;
}

}  // namespace duet::drama3
