// Qwen3.5-MoE hyper-parameters, read from a transformers `config.json` (at the top level, or under
// `text_config` when the text model sits inside a larger one, as in Drama 3).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"

namespace duet::qwen35_moe {

enum class LayerKind { LinearAttention, FullAttention };

std::string_view layer_kind_name(LayerKind kind);

struct Config {
    int64_t hidden = 0;
    int64_t vocab = 0;
    float norm_eps = 1e-6f;
    std::vector<LayerKind> layers;
    bool tie_embeddings = false;

    // Gated DeltaNet
    int64_t linear_k_heads = 0;
    int64_t linear_v_heads = 0;
    int64_t linear_k_dim = 0;
    int64_t linear_v_dim = 0;
    int64_t conv_kernel = 0;

    // Gated attention
    int64_t attn_heads = 0;
    int64_t kv_heads = 0;
    int64_t head_dim = 0;
    double partial_rotary = 0.0;
    double rope_theta = 0.0;

    // MoE
    int64_t experts = 0;
    int64_t experts_per_token = 0;
    int64_t expert_inter = 0;
    int64_t shared_inter = 0;
    bool norm_topk = true;

    int64_t linear_qk_width() const { return linear_k_heads * linear_k_dim; }
    int64_t linear_v_width() const { return linear_v_heads * linear_v_dim; }
    // Channels of the convolution: q | k | v.
    int64_t conv_dim() const { return 2 * linear_qk_width() + linear_v_width(); }
    // The leading dims of each head that RoPE rotates.
    int64_t rotary_dim() const { return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary); }
    int64_t count(LayerKind kind) const;
    // Every weight of the text model (embedding and LM head included, counted once when tied).
    int64_t parameter_count() const;
    // One letter per layer: L for linear attention, F for full attention.
    std::string pattern() const;

    // Checks every size is positive and every ratio divides; throws naming `source` and the field.
    void validate(std::string_view source) const;
};

Config parse_config(const json::Value& root, std::string_view source);
// The config.json fields parse_config reads back into `config` (transformers' names).
json::Value config_to_json(const Config& config);
Config load_config(const std::string& path);

// Layer kinds from a pattern of L (linear attention) and F (full attention), e.g. "LLLF".
std::vector<LayerKind> parse_layer_pattern(std::string_view pattern, std::string_view source);

// The layer kinds a config without `layer_types` gets: every `interval`-th layer full attention, as
// transformers' Qwen3.5 config fills them in from full_attention_interval.
std::vector<LayerKind> default_layer_kinds(int64_t layers, int64_t interval);

}  // namespace duet::qwen35_moe
