#include "models/qwen35_moe/random_weights.h"

#include <cmath>
#include <string>

#include "base/half.h"

namespace duet::qwen35_moe {

namespace {

// splitmix64: counter-based, so any element can be made independently (and in parallel) from
// (seed, tensor, index).
uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Uniform in [0, 1).
float unit(uint64_t key) { return static_cast<float>(mix(key) >> 40) * (1.0f / 16777216.0f); }

class Generator {
public:
    Generator(TensorSet& set, uint64_t seed, ThreadPool* pool) : set_(set), seed_(seed), pool_(pool) {}

    // bf16 values uniform in [lo, hi).
    void uniform(const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
        auto* out = reinterpret_cast<uint16_t*>(set_.add(name, DType::BF16, shape));
        const uint64_t key = next_key();
        const int64_t n = set_.find(name)->numel();
        parallel_for(pool_, n, 1 << 16, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                out[i] = f32_to_bf16(lo + (hi - lo) * unit(key + static_cast<uint64_t>(i)));
            }
        });
    }

    // Matrices [.., rows, cols] scaled so that a unit-RMS input gives roughly unit-RMS output.
    void matrix(const std::string& name, std::vector<int64_t> shape) {
        const float bound = std::sqrt(3.0f / static_cast<float>(shape.back()));
        uniform(name, std::move(shape), -bound, bound);
    }

    // bf16 values from a function of a uniform number in [0, 1).
    template <typename Fn>
    void mapped(const std::string& name, std::vector<int64_t> shape, Fn fn) {
        auto* out = reinterpret_cast<uint16_t*>(set_.add(name, DType::BF16, shape));
        const uint64_t key = next_key();
        const int64_t n = set_.find(name)->numel();
        for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(fn(unit(key + static_cast<uint64_t>(i))));
    }

private:
    uint64_t next_key() { return mix(seed_ ^ mix(++tensor_index_)) & ~0xFFFFFFFFFFull; }

    TensorSet& set_;
    uint64_t seed_;
    ThreadPool* pool_;
    uint64_t tensor_index_ = 0;
};

}  // namespace

std::shared_ptr<TensorSet> make_random_weights(const Config& c, uint64_t seed, ThreadPool* pool) {
    auto set = std::make_shared<TensorSet>();
    Generator g(*set, seed, pool);
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
