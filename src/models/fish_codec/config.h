// Hyper-parameters of Fish's modded DAC codec. The real codec (S2 Pro, Drama 3) ships as codec.pth
// without a config, so its values (fish-speech's modded_dac_vq.yaml) are built in; a
// codec_config.json beside the weights, with the same keys, overrides them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"

namespace duet::fish_codec {

// A causal window-limited transformer (the quantizer's pre/post modules, the encoder's last block).
struct TransformerConfig {
    int64_t n_layer = 0;
    int64_t n_head = 0;
    int64_t dim = 0;
    int64_t intermediate = 0;
    int64_t head_dim = 0;
    int64_t window = 0;  // attention reaches the last `window` positions, the query's own included
    float rope_base = 10000.0f;
    float norm_eps = 1e-5f;

    int64_t attn_width() const { return n_head * head_dim; }
};

struct Config {
    int64_t sample_rate = 44100;
    int64_t encoder_dim = 64;
    std::vector<int64_t> encoder_rates = {2, 4, 8, 8};
    int64_t latent_dim = 1024;
    int64_t decoder_dim = 1536;
    std::vector<int64_t> decoder_rates = {8, 8, 4, 2};
    // Transformer layers after each encoder block (n_head = dim / 64, FFN 3·dim, window below).
    std::vector<int64_t> encoder_transformer_layers = {0, 0, 0, 4};
    int64_t encoder_window = 512;
    int64_t head_dim = 64;
    float rope_base = 10000.0f;
    float norm_eps = 1e-5f;

    // Quantizer
    int64_t n_codebooks = 9;  // residual codebooks, after the semantic one
    int64_t codebook_size = 1024;
    int64_t codebook_dim = 8;
    int64_t semantic_codebook_size = 4096;
    std::vector<int64_t> downsample_factor = {2, 2};
    TransformerConfig pre_module;
    TransformerConfig post_module;

    // Audio samples per encoder latent step, and per code frame.
    int64_t hop_length() const;
    int64_t samples_per_frame() const;
    // The encoder transformer after block `block` (dims double per block).
    TransformerConfig encoder_transformer(size_t block) const;
    int64_t encoder_block_dim(size_t block) const { return encoder_dim << (block + 1); }
    int64_t decoder_block_dim(size_t block) const { return decoder_dim >> (block + 1); }
};

// modded_dac_vq.yaml.
Config real_config();

// The real config with the fields `root` gives replaced; `source` names it in errors. Checks the
// result for consistency.
Config parse_config(const json::Value& root, const std::string& source);

// `dir`/codec_config.json when present, else the real config.
Config load_config_for(const std::string& dir);

// Throws naming `source` when sizes do not fit together.
void validate(const Config& c, const std::string& source);

}  // namespace duet::fish_codec
