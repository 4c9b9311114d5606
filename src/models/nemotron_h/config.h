// Nemotron-H hyper-parameters, read from a transformers `config.json` (at the top level, or under
// `llm_config` in Nemotron 3.5 Transcribe checkpoints).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"

namespace duet::nemotron_h {

enum class LayerKind { Mamba, Attention, MoE, MLP };

std::string_view layer_kind_name(LayerKind kind);
// One character per kind, as in the legacy `hybrid_override_pattern`: M, *, E, -.
char layer_kind_symbol(LayerKind kind);

struct Config {
    int64_t hidden = 0;
    int64_t vocab = 0;
    float norm_eps = 1e-5f;
    std::vector<LayerKind> layers;

    // Mamba-2
    int64_t mamba_heads = 0;
    int64_t mamba_head_dim = 0;
    int64_t mamba_groups = 0;
    int64_t ssm_state = 0;
    int64_t conv_kernel = 0;
    float dt_min = 0.0f;  // time_step_limit: dt is clamped into [dt_min, dt_max]
    float dt_max = 0.0f;

    // Attention (GQA, no positional encoding)
    int64_t attn_heads = 0;
    int64_t kv_heads = 0;
    int64_t head_dim = 0;

    // MoE
    int64_t experts = 0;
    int64_t experts_per_token = 0;
    int64_t expert_inter = 0;
    int64_t shared_inter = 0;
    int64_t expert_groups = 1;       // n_group
    int64_t expert_groups_kept = 1;  // topk_group
    float routed_scale = 1.0f;
    bool norm_topk = true;

    // MLP layers
    int64_t mlp_inter = 0;

    int64_t mamba_inner() const { return mamba_heads * mamba_head_dim; }
    int64_t conv_dim() const { return mamba_inner() + 2 * mamba_groups * ssm_state; }
    int64_t in_proj_rows() const { return mamba_inner() + conv_dim() + mamba_heads; }
    int64_t count(LayerKind kind) const;
    // Every weight of the checkpoint's main model (embedding and LM head included).
    int64_t parameter_count() const;
    // The weights of the draft (MTP) module: fusion, one attention and one MoE layer, four norms.
    int64_t draft_parameter_count() const;
    // The layer kinds as a pattern string, e.g. "MEM*EMEM".
    std::string pattern() const;

    // Checks every size is positive and every ratio divides; throws naming `source` and the field.
    void validate(std::string_view source) const;
};

// Reads the config from a parsed config.json; `source` names the file in errors.
Config parse_config(const json::Value& root, std::string_view source);
Config load_config(const std::string& path);

// Parses a legacy `hybrid_override_pattern` such as "M-M*-E".
std::vector<LayerKind> parse_layer_pattern(std::string_view pattern, std::string_view source);

}  // namespace duet::nemotron_h
