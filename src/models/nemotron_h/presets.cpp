#include "models/nemotron_h/presets.h"

#include <cmath>

#include "base/error.h"

namespace duet::nemotron_h {

namespace {

Config nano_widths(std::string_view pattern) {
    Config c;
    c.hidden = 2688;
    c.vocab = 131072;
    c.norm_eps = 1e-5f;
    c.layers = parse_layer_pattern(pattern, "preset");
    c.mamba_heads = 64;
    c.mamba_head_dim = 64;
    c.mamba_groups = 8;
    c.ssm_state = 128;
    c.conv_kernel = 4;
    c.dt_min = 0.0f;
    c.dt_max = INFINITY;
    c.attn_heads = 32;
    c.kv_heads = 2;
    c.head_dim = 128;
    c.experts = 128;
    c.experts_per_token = 6;
    c.expert_inter = 1856;
    c.shared_inter = 3712;
    c.routed_scale = 2.5f;
    c.norm_topk = true;
    c.mlp_inter = 1856;
    return c;
}

}  // namespace

std::vector<std::string_view> preset_names() { return {"tiny", "nano-8l", "nano"}; }

Config preset_config(std::string_view name) {
    if (name == "tiny") {
        // The shape of fixtures/nemotron_h_tiny.
        Config c;
        c.hidden = 64;
        c.vocab = 512;
        c.layers = parse_layer_pattern("ME*M-EM*E", "preset");
        c.mamba_heads = 8;
        c.mamba_head_dim = 16;
        c.mamba_groups = 2;
        c.ssm_state = 16;
        c.conv_kernel = 4;
        c.dt_min = 0.0f;
        c.dt_max = INFINITY;
        c.attn_heads = 4;
        c.kv_heads = 2;
        c.head_dim = 16;
        c.experts = 8;
        c.experts_per_token = 2;
        c.expert_inter = 32;
        c.shared_inter = 48;
        c.routed_scale = 2.5f;
        c.mlp_inter = 96;
        return c;
    }
    if (name == "nano-8l") return nano_widths("MEM*EMEM");
    if (name == "nano") return nano_widths("MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME");
    std::string names;
    for (std::string_view known : preset_names()) names += std::string(names.empty() ? "" : ", ") + std::string(known);
    fail("unknown preset '", name, "', expected one of ", names);
}

json::Value config_to_json(const Config& c) {
    json::Value j = json::Value::object();
    j.set("architectures", json::Value::array().push(json::Value("NemotronHForCausalLM")));
    j.set("model_type", json::Value("nemotron_h"));
    j.set("hidden_size", json::Value(c.hidden));
    j.set("vocab_size", json::Value(c.vocab));
    j.set("layer_norm_epsilon", json::Value(static_cast<double>(c.norm_eps)));
    json::Value kinds = json::Value::array();
    for (LayerKind k : c.layers) {
        kinds.push(json::Value(std::string(k == LayerKind::Mamba ? "mamba"
                                           : k == LayerKind::Attention ? "attention"
                                           : k == LayerKind::MoE ? "moe" : "mlp")));
    }
    j.set("layers_block_type", kinds);
    j.set("mamba_num_heads", json::Value(c.mamba_heads));
    j.set("mamba_head_dim", json::Value(c.mamba_head_dim));
    j.set("n_groups", json::Value(c.mamba_groups));
    j.set("ssm_state_size", json::Value(c.ssm_state));
    j.set("conv_kernel", json::Value(c.conv_kernel));
    j.set("time_step_limit", json::Value::array()
                                 .push(json::Value(static_cast<double>(c.dt_min)))
                                 .push(json::Value(static_cast<double>(c.dt_max))));
    j.set("num_attention_heads", json::Value(c.attn_heads));
    j.set("num_key_value_heads", json::Value(c.kv_heads));
    j.set("head_dim", json::Value(c.head_dim));
    j.set("n_routed_experts", json::Value(c.experts));
    j.set("num_experts_per_tok", json::Value(c.experts_per_token));
    j.set("moe_intermediate_size", json::Value(c.expert_inter));
    j.set("moe_shared_expert_intermediate_size", json::Value(c.shared_inter));
    j.set("n_group", json::Value(c.expert_groups));
    j.set("topk_group", json::Value(c.expert_groups_kept));
    j.set("routed_scaling_factor", json::Value(static_cast<double>(c.routed_scale)));
    j.set("norm_topk_prob", json::Value(c.norm_topk));
    j.set("intermediate_size", json::Value(c.mlp_inter));
    return j;
}

}  // namespace duet::nemotron_h
