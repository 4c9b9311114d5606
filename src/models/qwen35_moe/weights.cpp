#include "models/qwen35_moe/weights.h"

#include <cmath>

#include "base/dtype.h"
#include "base/error.h"

namespace duet::qwen35_moe {

std::vector<float> zero_centred_to_scale(std::vector<float> w) {
    for (float& v : w) v += 1.0f;
    return w;
}

std::string Layout::describe() const {
    return str_cat(prefix, "*, ", fused_experts ? "fused" : "per-expert", " experts");
}

namespace {

std::string fused_gate_up_name(const std::string& mlp) { return mlp + "experts.gate_up_proj"; }
std::string fused_down_name(const std::string& mlp) { return mlp + "experts.down_proj"; }

// The name under which a fused tensor is stored: bare (what transformers saves) or with `.weight`.
std::string stored_name(const WeightBinder& b, const std::string& name) {
    return b.has(name) || !b.has(name + ".weight") ? name : name + ".weight";
}

void bind_linear(const Config& c, WeightBinder& b, const std::string& p, LinearAttentionWeights& w) {
    const std::string m = p + "linear_attn.";
    w.qkv = b.matrix({m + "in_proj_qkv.weight"}, c.conv_dim(), c.hidden);
    w.z = b.matrix({m + "in_proj_z.weight"}, c.linear_v_width(), c.hidden);
    w.b = b.matrix({m + "in_proj_b.weight"}, c.linear_v_heads, c.hidden);
    w.a = b.matrix({m + "in_proj_a.weight"}, c.linear_v_heads, c.hidden);
    w.out = b.matrix({m + "out_proj.weight"}, c.hidden, c.linear_v_width());
    w.conv_taps = b.vector({m + "conv1d.weight"}, {c.conv_dim(), c.conv_kernel});
    w.neg_exp_a_log = b.vector({m + "A_log"}, {c.linear_v_heads});
    for (float& v : w.neg_exp_a_log) v = -std::exp(v);
    w.dt_bias = b.vector({m + "dt_bias"}, {c.linear_v_heads});
    w.norm = b.vector({m + "norm.weight"}, {c.linear_v_dim});
}

void bind_attention(const Config& c, WeightBinder& b, const std::string& p, FullAttentionWeights& w) {
    const std::string m = p + "self_attn.";
    w.q = b.matrix({m + "q_proj.weight"}, 2 * c.attn_heads * c.head_dim, c.hidden);
    w.k = b.matrix({m + "k_proj.weight"}, c.kv_heads * c.head_dim, c.hidden);
    w.v = b.matrix({m + "v_proj.weight"}, c.kv_heads * c.head_dim, c.hidden);
    w.o = b.matrix({m + "o_proj.weight"}, c.hidden, c.attn_heads * c.head_dim);
    w.q_norm = zero_centred_to_scale(b.vector({m + "q_norm.weight"}, {c.head_dim}));
    w.k_norm = zero_centred_to_scale(b.vector({m + "k_norm.weight"}, {c.head_dim}));
}

// The gate and up halves of a fused [2I, H] expert matrix (gate rows first).
void split_gate_up(const MatrixView& both, int64_t inter, MatrixView& gate, MatrixView& up) {
    gate = {both.dtype, inter, both.cols, both.data};
    up = {both.dtype, inter, both.cols,
          static_cast<const uint8_t*>(both.data) + static_cast<size_t>(inter * both.cols) * dtype_size(both.dtype)};
}

void bind_moe(const Config& c, WeightBinder& b, const std::string& p, bool fused, SwigluMoeWeights& w) {
    const std::string m = p + "mlp.";
    w.router = b.matrix({m + "gate.weight"}, c.experts, c.hidden);
    if (fused) {
        const std::vector<MatrixView> both =
            b.matrix_stack(stored_name(b, fused_gate_up_name(m)), c.experts, 2 * c.expert_inter, c.hidden);
        w.down = b.matrix_stack(stored_name(b, fused_down_name(m)), c.experts, c.hidden, c.expert_inter);
        w.gate.resize(both.size());
        w.up.resize(both.size());
        for (size_t e = 0; e < both.size(); ++e) split_gate_up(both[e], c.expert_inter, w.gate[e], w.up[e]);
    } else {
        for (int64_t e = 0; e < c.experts; ++e) {
            const std::string ex = m + "experts." + std::to_string(e) + ".";
            w.gate.push_back(b.matrix({ex + "gate_proj.weight"}, c.expert_inter, c.hidden));
            w.up.push_back(b.matrix({ex + "up_proj.weight"}, c.expert_inter, c.hidden));
            w.down.push_back(b.matrix({ex + "down_proj.weight"}, c.hidden, c.expert_inter));
        }
    }
    const std::string s = m + "shared_expert.";
    w.shared_gate = b.matrix({s + "gate_proj.weight"}, c.shared_inter, c.hidden);
    w.shared_up = b.matrix({s + "up_proj.weight"}, c.shared_inter, c.hidden);
    w.shared_down = b.matrix({s + "down_proj.weight"}, c.hidden, c.shared_inter);
    w.shared_expert_gate = b.matrix({m + "shared_expert_gate.weight"}, 1, c.hidden);
}

}  // namespace

Layout detect_layout(const WeightBinder& binder, const std::string& source) {
    Layout layout;
    for (const char* prefix : {"model.language_model.", "model.", "text_model.model."}) {
        if (binder.has(std::string(prefix) + "embed_tokens.weight")) {
            layout.prefix = prefix;
            break;
        }
    }
    require(!layout.prefix.empty(), source,
            ": no embedding table: expected 'model.language_model.embed_tokens.weight', "
            "'model.embed_tokens.weight' or 'text_model.model.embed_tokens.weight'");
    layout.lm_head = layout.prefix == "text_model.model." && binder.has("text_model.lm_head.weight")
                         ? "text_model.lm_head.weight"
                         : "lm_head.weight";
    const std::string mlp0 = layout.prefix + "layers.0.mlp.";
    layout.fused_experts = binder.has(fused_gate_up_name(mlp0)) || binder.has(fused_gate_up_name(mlp0) + ".weight");
    return layout;
}

Weights bind_weights(const Config& c, WeightBinder& b, const Layout& layout) {
    Weights w;
    w.embed = b.matrix({layout.prefix + "embed_tokens.weight"}, c.vocab, c.hidden);
    w.lm_head = c.tie_embeddings && !b.has(layout.lm_head) ? w.embed
                                                            : b.matrix({layout.lm_head}, c.vocab, c.hidden);
    w.final_norm = zero_centred_to_scale(b.vector({layout.prefix + "norm.weight"}, {c.hidden}));
    int64_t linear_slots = 0, attention_slots = 0;
    for (size_t i = 0; i < c.layers.size(); ++i) {
        Layer& layer = w.layers.emplace_back();
        layer.kind = c.layers[i];
        const std::string p = layout.prefix + "layers." + std::to_string(i) + ".";
        layer.input_norm = zero_centred_to_scale(b.vector({p + "input_layernorm.weight"}, {c.hidden}));
        layer.post_norm = zero_centred_to_scale(b.vector({p + "post_attention_layernorm.weight"}, {c.hidden}));
        if (layer.kind == LayerKind::LinearAttention) {
            layer.state_slot = linear_slots++;
            bind_linear(c, b, p, layer.linear);
        } else {
            layer.state_slot = attention_slots++;
            bind_attention(c, b, p, layer.attention);
        }
        bind_moe(c, b, p, layout.fused_experts, layer.moe);
    }
    b.finish();
    w.storage = b.take_storage();
    return w;
}

}  // namespace duet::qwen35_moe
