// Drama 3 hyper-parameters from its `config.json`: the Qwen3.5-MoE backbone (`text_config`), the
// semantic token range and EOS, and the codebook tower (`audio_decoder_config`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/json.h"
#include "models/qwen35_moe/config.h"
#include "text/drama3_prompt.h"

namespace duet::drama3 {

struct TowerConfig {
    int64_t dim = 0;  // equals the backbone's hidden size
    int64_t heads = 0, kv_heads = 0, head_dim = 0;
    int64_t inter = 0;          // SwiGLU width
    float norm_eps = 1e-6f;
    int64_t num_codebooks = 0;  // code0 (semantic) and the residual codebooks
    int64_t codebook_size = 0;  // rows per codebook in the code embeddings and the heads
    int64_t shared_layers = 0;  // the layers before the per-codebook ones
    double rope_theta = 0.0;
    double rotary_fraction = 0.0;
    int64_t backbone_codebooks = 0;  // codebooks summed into the backbone's input row

    // shared layers, then one per residual codebook
    int64_t layers() const { return shared_layers + num_codebooks - 1; }
    // The frame column layer t embeds: the semantic code for the shared layers, then each
    // per-codebook layer the code before the one its head predicts.
    int64_t input_column(int64_t t) const { return t < shared_layers ? 1 : 1 + (t - shared_layers); }
    int64_t rotary_dim() const { return static_cast<int64_t>(static_cast<double>(head_dim) * rotary_fraction); }
};

struct Config {
    qwen35_moe::Config backbone;
    TowerConfig tower;
    int64_t semantic_start = 0;  // the token of semantic code 0; the range up to semantic_end is contiguous
    int64_t semantic_end = 0;
    int64_t eos = 0;

    int64_t semantic_count() const { return semantic_end - semantic_start + 1; }
    // Candidate logits: the semantic tokens, then EOS.
    int64_t candidates() const { return semantic_count() + 1; }
    int64_t frame_width() const { return 1 + tower.num_codebooks; }
    // What the prompt builder needs to turn text and reference codes into rows.
    text::Drama3Vocabulary vocabulary() const;
    int64_t parameter_count() const;

    // Every size positive, every range inside the vocabulary and the codebooks; throws naming `source`.
    void validate(std::string_view source) const;
};

Config parse_config(const json::Value& root, std::string_view source);
// A config.json that parse_config reads back into `config`.
json::Value config_to_json(const Config& config);
Config load_config(const std::string& path);

}  // namespace duet::drama3
