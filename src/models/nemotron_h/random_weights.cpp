#include "models/nemotron_h/random_weights.h"

#include <cmath>
#include <cstring>
#include <string>

#include "models/random_tensors.h"

namespace duet::nemotron_h {

std::shared_ptr<TensorSet> make_random_weights(const Config& c, uint64_t seed, ThreadPool* pool, bool with_draft,
                                               std::shared_ptr<DeviceTensorStorage> device) {
    auto set = std::make_shared<TensorSet>(std::move(device));
    RandomTensorWriter g(*set, seed, pool);
    auto norm = [&](const std::string& name, int64_t width) { g.uniform(name, {width}, 0.9f, 1.1f); };

    auto attention = [&](const std::string& m) {
        g.matrix(m + "q_proj.weight", {c.attn_heads * c.head_dim, c.hidden});
        g.matrix(m + "k_proj.weight", {c.kv_heads * c.head_dim, c.hidden});
        g.matrix(m + "v_proj.weight", {c.kv_heads * c.head_dim, c.hidden});
        g.matrix(m + "o_proj.weight", {c.hidden, c.attn_heads * c.head_dim});
    };
    auto moe = [&](const std::string& m) {
        g.matrix(m + "gate.weight", {c.experts, c.hidden});
        g.uniform(m + "gate.e_score_correction_bias", {c.experts}, -0.05f, 0.05f);
        for (int64_t e = 0; e < c.experts; ++e) {
            const std::string ex = m + "experts." + std::to_string(e) + ".";
            g.matrix(ex + "up_proj.weight", {c.expert_inter, c.hidden});
            g.matrix(ex + "down_proj.weight", {c.hidden, c.expert_inter});
        }
        g.matrix(m + "shared_experts.up_proj.weight", {c.shared_inter, c.hidden});
        g.matrix(m + "shared_experts.down_proj.weight", {c.hidden, c.shared_inter});
    };

    g.uniform("backbone.embeddings.weight", {c.vocab, c.hidden}, -1.0f, 1.0f);
    for (size_t i = 0; i < c.layers.size(); ++i) {
        const std::string p = "backbone.layers." + std::to_string(i);
        const std::string m = p + ".mixer.";
        norm(p + ".norm.weight", c.hidden);
        switch (c.layers[i]) {
            case LayerKind::Mamba:
                g.matrix(m + "in_proj.weight", {c.in_proj_rows(), c.hidden});
                g.uniform(m + "conv1d.weight", {c.conv_dim(), 1, c.conv_kernel}, -0.5f, 0.5f);
                g.uniform(m + "conv1d.bias", {c.conv_dim()}, -0.1f, 0.1f);
                // A in [1, 16], dt_bias the inverse softplus of dt in [0.001, 0.1], as Mamba-2 initialises.
                g.mapped(m + "A_log", {c.mamba_heads}, [](float u) { return std::log(1.0f + 15.0f * u); });
                g.mapped(m + "dt_bias", {c.mamba_heads}, [](float u) {
                    const float dt = std::exp(std::log(0.001f) + u * (std::log(0.1f) - std::log(0.001f)));
                    return dt + std::log(-std::expm1(-dt));
                });
                g.uniform(m + "D", {c.mamba_heads}, 0.5f, 1.5f);
                norm(m + "norm.weight", c.mamba_inner());
                g.matrix(m + "out_proj.weight", {c.hidden, c.mamba_inner()});
                break;
            case LayerKind::Attention: attention(m); break;
            case LayerKind::MoE: moe(m); break;
            case LayerKind::MLP:
                g.matrix(m + "up_proj.weight", {c.mlp_inter, c.hidden});
                g.matrix(m + "down_proj.weight", {c.hidden, c.mlp_inter});
                break;
        }
    }
    norm("backbone.norm_f.weight", c.hidden);
    g.matrix("lm_head.weight", {c.vocab, c.hidden});
    if (with_draft && c.attn_heads > 0 && c.experts > 0) {
        // The draft module as Nemotron checkpoints ship it: fusion + attention, then MoE + output norm.
        norm("mtp.layers.0.enorm.weight", c.hidden);
        norm("mtp.layers.0.hnorm.weight", c.hidden);
        g.matrix("mtp.layers.0.eh_proj.weight", {c.hidden, 2 * c.hidden});
        norm("mtp.layers.0.norm.weight", c.hidden);
        attention("mtp.layers.0.mixer.");
        norm("mtp.layers.1.norm.weight", c.hidden);
        moe("mtp.layers.1.mlp.");
        norm("mtp.layers.1.final_layernorm.weight", c.hidden);
    }
    return set;
}

}  // namespace duet::nemotron_h
