#include "models/qwen35_moe/presets.h"

#include "base/error.h"

namespace duet::qwen35_moe {

namespace {

// Qwen3.5-35B-A3B's widths (docs/qwen35_moe.md), with `layers` layers of the 3:1 pattern.
Config a3b_widths(int64_t layers) {
    Config c;
    c.hidden = 2048;
    c.vocab = 248320;
    c.norm_eps = 1e-6f;
    c.layers = default_layer_kinds(layers, 4);
    c.linear_k_heads = 16;
    c.linear_v_heads = 32;
    c.linear_k_dim = 128;
    c.linear_v_dim = 128;
    c.conv_kernel = 4;
    c.attn_heads = 16;
    c.kv_heads = 2;
    c.head_dim = 256;
    c.partial_rotary = 0.25;
    c.rope_theta = 1e7;
    c.experts = 256;
    c.experts_per_token = 8;
    c.expert_inter = 512;
    c.shared_inter = 512;
    return c;
}

}  // namespace

std::vector<std::string_view> preset_names() { return {"tiny", "a3b-8l", "a3b"}; }

Config preset_config(std::string_view name) {
    if (name == "tiny") {
        // The shape of fixtures/qwen35_moe_tiny.
        Config c;
        c.hidden = 64;
        c.vocab = 512;
        c.layers = default_layer_kinds(8, 4);
        c.linear_k_heads = 2;
        c.linear_v_heads = 4;
        c.linear_k_dim = 16;
        c.linear_v_dim = 16;
        c.conv_kernel = 4;
        c.attn_heads = 4;
        c.kv_heads = 2;
        c.head_dim = 32;
        c.partial_rotary = 0.25;
        c.rope_theta = 1e7;
        c.experts = 8;
        c.experts_per_token = 2;
        c.expert_inter = 32;
        c.shared_inter = 48;
        return c;
    }
    if (name == "a3b-8l") return a3b_widths(8);
    if (name == "a3b") return a3b_widths(40);
    std::string names;
    for (std::string_view known : preset_names()) names += std::string(names.empty() ? "" : ", ") + std::string(known);
    fail("unknown preset '", name, "', expected one of ", names);
}

}  // namespace duet::qwen35_moe
