#include "models/nemotron_h/weights.h"

#include <cmath>

#include "base/error.h"

namespace duet::nemotron_h {

Layout detect_layout(const WeightBinder& binder, const std::string& source) {
    if (binder.has("backbone.embeddings.weight")) {
        return {"hub", "backbone.embeddings.weight", "backbone.norm_f.weight", "backbone.layers"};
    }
    if (binder.has("model.embed_tokens.weight")) {
        return {"transcribe", "model.embed_tokens.weight", "model.norm.weight", "model.layers"};
    }
    fail(source, ": no embedding table: expected 'backbone.embeddings.weight' (hub layout) or "
                 "'model.embed_tokens.weight' (Transcribe layout), either optionally under '", kLlmPrefix, "'");
}

std::string checkpoint_prefix(const TensorLookup& lookup) {
    for (const char* embed : {"backbone.embeddings.weight", "model.embed_tokens.weight"}) {
        if (lookup(embed) != nullptr) return "";
    }
    for (const char* embed : {"backbone.embeddings.weight", "model.embed_tokens.weight"}) {
        if (lookup(std::string(kLlmPrefix) + embed) != nullptr) return std::string(kLlmPrefix);
    }
    return "";
}

std::string fused_experts_up_name(const std::string& moe_prefix) { return moe_prefix + ".experts.up_proj"; }
std::string fused_experts_down_name(const std::string& moe_prefix) { return moe_prefix + ".experts.down_proj"; }

namespace {

void bind_mamba(const Config& c, WeightBinder& b, const std::string& p, MambaWeights& w) {
    const std::string m = p + ".mixer.";
    w.in_proj = b.matrix({m + "in_proj.weight"}, c.in_proj_rows(), c.hidden);
    w.out_proj = b.matrix({m + "out_proj.weight"}, c.hidden, c.mamba_inner());
    w.conv_taps = b.vector({m + "conv1d.weight"}, {c.conv_dim(), c.conv_kernel});
    w.conv_bias = b.vector({m + "conv1d.bias"}, {c.conv_dim()});
    w.a = b.vector({m + "A_log"}, {c.mamba_heads});
    for (float& v : w.a) v = -std::exp(v);
    w.d = b.vector({m + "D"}, {c.mamba_heads});
    w.dt_bias = b.vector({m + "dt_bias"}, {c.mamba_heads});
    w.norm = b.vector({m + "norm.weight"}, {c.mamba_inner()});
}

void bind_attention(const Config& c, WeightBinder& b, const std::string& p, AttentionWeights& w) {
    const std::string m = p + ".mixer.";
    w.q = b.matrix({m + "q_proj.weight"}, c.attn_heads * c.head_dim, c.hidden);
    w.k = b.matrix({m + "k_proj.weight"}, c.kv_heads * c.head_dim, c.hidden);
    w.v = b.matrix({m + "v_proj.weight"}, c.kv_heads * c.head_dim, c.hidden);
    w.o = b.matrix({m + "o_proj.weight"}, c.hidden, c.attn_heads * c.head_dim);
}

void bind_mlp(const Config& c, WeightBinder& b, const std::string& p, MlpWeights& w) {
    w.up = b.matrix({p + ".mixer.up_proj.weight", p + ".mlp.up_proj.weight"}, c.mlp_inter, c.hidden);
    w.down = b.matrix({p + ".mixer.down_proj.weight", p + ".mlp.down_proj.weight"}, c.hidden, c.mlp_inter);
}

void bind_moe(const Config& c, WeightBinder& b, const std::string& p, MoeLayerWeights& w) {
    // The hub layout keeps the MoE under `mixer`, the Transcribe layout under `mlp`.
    const std::string m = b.has(p + ".mlp.gate.weight") ? p + ".mlp" : p + ".mixer";
    MoeWeights& e = w.experts;
    e.router = b.matrix({m + ".gate.weight"}, c.experts, c.hidden);
    w.score_bias = b.vector({m + ".gate.e_score_correction_bias"}, {c.experts});
    const std::string fused_up = fused_experts_up_name(m);
    if (b.has(fused_up) || b.has(fused_up + ".weight")) {
        const std::string suffix = b.has(fused_up) ? "" : ".weight";
        e.up = b.matrix_stack(fused_up + suffix, c.experts, c.expert_inter, c.hidden);
        e.down = b.matrix_stack(fused_experts_down_name(m) + suffix, c.experts, c.hidden, c.expert_inter);
    } else {
        for (int64_t x = 0; x < c.experts; ++x) {
            const std::string ex = m + ".experts." + std::to_string(x);
            e.up.push_back(b.matrix({ex + ".up_proj.weight"}, c.expert_inter, c.hidden));
            e.down.push_back(b.matrix({ex + ".down_proj.weight"}, c.hidden, c.expert_inter));
        }
    }
    e.shared_up = b.matrix({m + ".shared_experts.up_proj.weight"}, c.shared_inter, c.hidden);
    e.shared_down = b.matrix({m + ".shared_experts.down_proj.weight"}, c.hidden, c.shared_inter);
}

}  // namespace

namespace {

DraftWeights bind_draft(const Config& c, WeightBinder& b) {
    require(c.attn_heads > 0 && c.experts > 0, "the checkpoint has draft (mtp.*) tensors but its config "
                                               "has no attention or MoE sizes for them");
    DraftWeights d;
    const std::string fuse = "mtp.layers.0", moe = "mtp.layers.1";
    d.embed_norm = b.vector({fuse + ".enorm.weight"}, {c.hidden});
    d.hidden_norm = b.vector({fuse + ".hnorm.weight"}, {c.hidden});
    d.fuse = b.matrix({fuse + ".eh_proj.weight"}, c.hidden, 2 * c.hidden);
    d.attention_norm = b.vector({fuse + ".norm.weight"}, {c.hidden});
    bind_attention(c, b, fuse, d.attention);
    d.moe_norm = b.vector({moe + ".norm.weight"}, {c.hidden});
    bind_moe(c, b, moe, d.moe);
    d.output_norm = b.vector({moe + ".final_layernorm.weight"}, {c.hidden});
    return d;
}

}  // namespace

Weights bind_weights(const Config& c, WeightBinder& b, const Layout& layout, bool with_draft) {
    Weights w;
    w.embed = b.matrix({layout.embed}, c.vocab, c.hidden);
    w.lm_head = b.matrix({"lm_head.weight"}, c.vocab, c.hidden);
    w.final_norm = b.vector({layout.final_norm}, {c.hidden});
    int64_t mamba_slots = 0, attention_slots = 0;
    for (size_t i = 0; i < c.layers.size(); ++i) {
        Layer& layer = w.layers.emplace_back();
        layer.kind = c.layers[i];
        const std::string p = layout.layers_prefix + "." + std::to_string(i);
        layer.norm = b.vector({p + ".norm.weight"}, {c.hidden});
        switch (layer.kind) {
            case LayerKind::Mamba:
                layer.state_slot = mamba_slots++;
                bind_mamba(c, b, p, layer.mamba);
                break;
            case LayerKind::Attention:
                layer.state_slot = attention_slots++;
                bind_attention(c, b, p, layer.attention);
                break;
            case LayerKind::MoE: bind_moe(c, b, p, layer.moe); break;
            case LayerKind::MLP: bind_mlp(c, b, p, layer.mlp); break;
        }
    }
    if (with_draft) w.draft = bind_draft(c, b);
    b.finish();
    // Point each MoE at its bias only now that the layers no longer move.
    for (Layer& layer : w.layers) layer.moe.experts.score_bias = layer.moe.score_bias.data();
    if (w.draft) w.draft->moe.experts.score_bias = w.draft->moe.score_bias.data();
    w.storage = b.take_storage();
    return w;
}

}  // namespace duet::nemotron_h
