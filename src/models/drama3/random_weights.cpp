#include "models/drama3/random_weights.h"

#include "models/drama3/weights.h"
#include "models/qwen35_moe/random_weights.h"
#include "models/random_tensors.h"

namespace duet::drama3 {

std::shared_ptr<TensorSet> make_random_weights(const Config& c, uint64_t seed, ThreadPool* pool,
                                               std::shared_ptr<DeviceTensorStorage> device) {
    std::shared_ptr<TensorSet> set = qwen35_moe::make_random_weights(c.backbone, seed, pool, std::move(device));
    RandomTensorWriter g(*set, seed ^ 0xD4A3A3ull, pool);
    const TowerConfig& t = c.tower;
    g.uniform("audio_decoder.codebook_embeddings.weight", {t.num_codebooks * t.codebook_size, t.dim}, -1.0f, 1.0f);
    auto norm = [&](const std::string& name) { g.uniform(name, {t.dim}, 0.9f, 1.1f); };
    for (int64_t i = 0; i < t.layers(); ++i) {
        const std::string p = tower_layer_prefix(t, i);
        g.uniform(p + "embed_tokens.weight", {t.codebook_size, t.dim}, -1.0f, 1.0f);
        for (const char* n : {"enorm.weight", "hnorm.weight", "input_layernorm.weight",
                              "post_attention_layernorm.weight", "norm.weight"}) {
            norm(p + n);
        }
        g.matrix(p + "eh_proj.weight", {t.dim, 2 * t.dim});
        const std::string a = p + "self_attn.";
        g.matrix(a + "q_proj.weight", {2 * t.heads * t.head_dim, t.dim});
        g.matrix(a + "k_proj.weight", {t.kv_heads * t.head_dim, t.dim});
        g.matrix(a + "v_proj.weight", {t.kv_heads * t.head_dim, t.dim});
        g.matrix(a + "o_proj.weight", {t.dim, t.heads * t.head_dim});
        g.uniform(a + "q_norm.weight", {t.head_dim}, 0.9f, 1.1f);
        g.uniform(a + "k_norm.weight", {t.head_dim}, 0.9f, 1.1f);
        g.matrix(p + "mlp.gate_proj.weight", {t.inter, t.dim});
        g.matrix(p + "mlp.up_proj.weight", {t.inter, t.dim});
        g.matrix(p + "mlp.down_proj.weight", {t.dim, t.inter});
        if (i >= t.shared_layers) g.matrix(p + "head.weight", {t.codebook_size, t.dim});
    }
    return set;
}

size_t random_weight_bytes(const Config& c) { return static_cast<size_t>(c.parameter_count()) * 2; }

}  // namespace duet::drama3
