#include "models/qwen35_moe/random_weights.h"

#include <cmath>
#include <string>

#include "models/random_tensors.h"

namespace duet::qwen35_moe {

std::shared_ptr<TensorSet> make_random_weights(const Config& c, uint64_t seed, ThreadPool* pool,
                                               std::shared_ptr<DeviceTensorStorage> device) {
    auto set = std::make_shared<TensorSet>(std::move(device));
    RandomTensorWriter g(*set, seed, pool);
    // Zero-centred norms scale by 1 + w, so their weights sit near 0; the GDN output norm near 1.
    auto zero_centred = [&](const std::string& name, int64_t width) { g.uniform(name, {width}, -0.1f, 0.1f); };
    const std::string root = "model.language_model.";

    g.uniform(root + "embed_tokens.weight", {c.vocab, c.hidden}, -1.0f, 1.0f);
    for (size_t i = 0; i < c.layers.size(); ++i) {
        const std::string p = root + "layers." + std::to_string(i) + ".";
        zero_centred(p + "input_layernorm.weight", c.hidden);
        zero_centred(p + "post_attention_layernorm.weight", c.hidden);
        if (c.layers[i] == LayerKind::LinearAttention) {
            const std::string m = p + "linear_attn.";
            g.matrix(m + "in_proj_qkv.weight", {c.conv_dim(), c.hidden});
            g.matrix(m + "in_proj_z.weight", {c.linear_v_width(), c.hidden});
            g.matrix(m + "in_proj_b.weight", {c.linear_v_heads, c.hidden});
            g.matrix(m + "in_proj_a.weight", {c.linear_v_heads, c.hidden});
            g.uniform(m + "conv1d.weight", {c.conv_dim(), 1, c.conv_kernel}, -0.5f, 0.5f);
            // A in [1, 16] and dt_bias the inverse softplus of dt in [0.001, 0.1], as the reference initialises.
            g.mapped(m + "A_log", {c.linear_v_heads}, [](float u) { return std::log(1.0f + 15.0f * u); });
            g.mapped(m + "dt_bias", {c.linear_v_heads}, [](float u) {
                const float dt = std::exp(std::log(0.001f) + u * (std::log(0.1f) - std::log(0.001f)));
                return dt + std::log(-std::expm1(-dt));
            });
            g.uniform(m + "norm.weight", {c.linear_v_dim}, 0.9f, 1.1f);
            g.matrix(m + "out_proj.weight", {c.hidden, c.linear_v_width()});
        } else {
            const std::string m = p + "self_attn.";
            g.matrix(m + "q_proj.weight", {2 * c.attn_heads * c.head_dim, c.hidden});
            g.matrix(m + "k_proj.weight", {c.kv_heads * c.head_dim, c.hidden});
            g.matrix(m + "v_proj.weight", {c.kv_heads * c.head_dim, c.hidden});
            g.matrix(m + "o_proj.weight", {c.hidden, c.attn_heads * c.head_dim});
            zero_centred(m + "q_norm.weight", c.head_dim);
            zero_centred(m + "k_norm.weight", c.head_dim);
        }
        const std::string m = p + "mlp.";
        g.matrix(m + "gate.weight", {c.experts, c.hidden});
        g.matrix(m + "experts.gate_up_proj", {c.experts, 2 * c.expert_inter, c.hidden});
        g.matrix(m + "experts.down_proj", {c.experts, c.hidden, c.expert_inter});
        g.matrix(m + "shared_expert.gate_proj.weight", {c.shared_inter, c.hidden});
        g.matrix(m + "shared_expert.up_proj.weight", {c.shared_inter, c.hidden});
        g.matrix(m + "shared_expert.down_proj.weight", {c.hidden, c.shared_inter});
        g.matrix(m + "shared_expert_gate.weight", {1, c.hidden});
    }
    zero_centred(root + "norm.weight", c.hidden);
    if (!c.tie_embeddings) g.matrix("lm_head.weight", {c.vocab, c.hidden});
    return set;
}

}  // namespace duet::qwen35_moe
