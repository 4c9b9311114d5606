#include "models/fish_codec/random_weights.h"

#include <cmath>

#include "base/error.h"
#include "models/random_tensors.h"

namespace duet::fish_codec {

namespace {

class Maker {
public:
    Maker(TensorSet& set, uint64_t seed, ThreadPool* pool) : w_(set, seed, pool) {}

    // Uniform with the variance that keeps a unit-variance input at unit variance over `fan_in` terms.
    void scaled(const std::string& name, std::vector<int64_t> shape, int64_t fan_in) {
        const float bound = std::sqrt(3.0f / static_cast<float>(fan_in));
        w_.uniform(name, std::move(shape), -bound, bound);
    }
    void bias(const std::string& name, int64_t n) { w_.uniform(name, {n}, -0.01f, 0.01f); }
    void conv(const std::string& prefix, int64_t in, int64_t out, int64_t kernel) {
        scaled(prefix + ".conv.weight", {out, in, kernel}, in * kernel);
        bias(prefix + ".conv.bias", out);
    }
    void conv_transpose(const std::string& prefix, int64_t in, int64_t out, int64_t kernel, int64_t stride) {
        scaled(prefix + ".conv.weight", {in, out, kernel}, in * kernel / stride);
        bias(prefix + ".conv.bias", out);
    }
    void snake(const std::string& prefix, int64_t channels) { w_.uniform(prefix + ".alpha", {1, channels, 1}, 0.5f, 1.5f); }
    void residual_unit(const std::string& prefix, int64_t dim) {
        snake(prefix + ".block.0", dim);
        conv(prefix + ".block.1", dim, dim, 7);
        snake(prefix + ".block.2", dim);
        conv(prefix + ".block.3", dim, dim, 1);
    }
    void ones(const std::string& name, int64_t n) { w_.uniform(name, {n}, 0.9f, 1.1f); }
    void layer_scale(const std::string& name, int64_t n) { w_.uniform(name, {n}, 0.05f, 0.15f); }
    void convnext(const std::string& prefix, int64_t dim) {
        scaled(prefix + ".dwconv.conv.weight", {dim, 1, 7}, 7);
        bias(prefix + ".dwconv.conv.bias", dim);
        ones(prefix + ".norm.weight", dim);
        bias(prefix + ".norm.bias", dim);
        scaled(prefix + ".pwconv1.weight", {4 * dim, dim}, dim);
        bias(prefix + ".pwconv1.bias", 4 * dim);
        scaled(prefix + ".pwconv2.weight", {dim, 4 * dim}, 4 * dim);
        bias(prefix + ".pwconv2.bias", dim);
        layer_scale(prefix + ".gamma", dim);
    }
    void transformer(const std::string& prefix, const TransformerConfig& c) {
        const int64_t d = c.dim, a = c.attn_width(), f = c.intermediate;
        for (int64_t i = 0; i < c.n_layer; ++i) {
            const std::string p = str_cat(prefix, ".layers.", i);
            scaled(p + ".attention.wqkv.weight", {3 * a, d}, d);
            scaled(p + ".attention.wo.weight", {d, a}, a);
            scaled(p + ".feed_forward.w1.weight", {f, d}, d);
            scaled(p + ".feed_forward.w3.weight", {f, d}, d);
            scaled(p + ".feed_forward.w2.weight", {d, f}, f);
            ones(p + ".ffn_norm.weight", d);
            ones(p + ".attention_norm.weight", d);
            layer_scale(p + ".attention_layer_scale.gamma", d);
            layer_scale(p + ".ffn_layer_scale.gamma", d);
        }
        ones(prefix + ".norm.weight", d);
    }
    void codebook(const std::string& prefix, int64_t latent, int64_t size, int64_t dim) {
        scaled(prefix + ".in_proj.weight", {dim, latent, 1}, latent);
        bias(prefix + ".in_proj.bias", dim);
        scaled(prefix + ".out_proj.weight", {latent, dim, 1}, dim);
        bias(prefix + ".out_proj.bias", latent);
        w_.uniform(prefix + ".codebook.weight", {size, dim}, -1.0f, 1.0f);
    }

private:
    RandomTensorWriter w_;
};

}  // namespace

std::shared_ptr<TensorSet> make_random_weights(const Config& c, uint64_t seed, ThreadPool* pool) {
    validate(c, "random codec config");
    auto set = std::make_shared<TensorSet>();
    Maker m(*set, seed, pool);
    m.conv("encoder.block.0", 1, c.encoder_dim, 7);
    const size_t n_enc = c.encoder_rates.size();
    for (size_t b = 0; b < n_enc; ++b) {
        const std::string p = str_cat("encoder.block.", b + 1);
        const int64_t dim = c.encoder_block_dim(b);
        for (int u = 0; u < 3; ++u) m.residual_unit(str_cat(p, ".block.", u), dim / 2);
        m.snake(p + ".block.3", dim / 2);
        m.conv(p + ".block.4", dim / 2, dim, 2 * c.encoder_rates[b]);
        if (c.encoder_transformer_layers[b] > 0) m.transformer(p + ".block.5", c.encoder_transformer(b));
    }
    const int64_t top = c.encoder_block_dim(n_enc - 1);
    m.snake(str_cat("encoder.block.", n_enc + 1), top);
    m.conv(str_cat("encoder.block.", n_enc + 2), top, c.latent_dim, 3);

    m.codebook("quantizer.semantic_quantizer.quantizers.0", c.latent_dim, c.semantic_codebook_size, c.codebook_dim);
    for (int64_t i = 0; i < c.n_codebooks; ++i)
        m.codebook(str_cat("quantizer.quantizer.quantizers.", i), c.latent_dim, c.codebook_size, c.codebook_dim);
    const size_t n = c.downsample_factor.size();
    for (size_t i = 0; i < n; ++i) {
        m.conv(str_cat("quantizer.downsample.", i, ".0"), c.latent_dim, c.latent_dim, c.downsample_factor[i]);
        m.convnext(str_cat("quantizer.downsample.", i, ".1"), c.latent_dim);
        const int64_t f = c.downsample_factor[n - 1 - i];
        m.conv_transpose(str_cat("quantizer.upsample.", i, ".0"), c.latent_dim, c.latent_dim, f, f);
        m.convnext(str_cat("quantizer.upsample.", i, ".1"), c.latent_dim);
    }
    m.transformer("quantizer.pre_module", c.pre_module);
    m.transformer("quantizer.post_module", c.post_module);

    m.conv("decoder.model.0", c.latent_dim, c.decoder_dim, 7);
    const size_t n_dec = c.decoder_rates.size();
    for (size_t b = 0; b < n_dec; ++b) {
        const std::string p = str_cat("decoder.model.", b + 1);
        const int64_t in = c.decoder_dim >> b, out = c.decoder_block_dim(b);
        m.snake(p + ".block.0", in);
        m.conv_transpose(p + ".block.1", in, out, 2 * c.decoder_rates[b], c.decoder_rates[b]);
        for (int u = 0; u < 3; ++u) m.residual_unit(str_cat(p, ".block.", u + 2), out);
    }
    const int64_t dec_top = c.decoder_block_dim(n_dec - 1);
    m.snake(str_cat("decoder.model.", n_dec + 1), dec_top);
    m.conv(str_cat("decoder.model.", n_dec + 2), dec_top, 1, 7);
    return set;
}

Config tiny_config() {
    Config c;
    c.encoder_dim = 4;
    c.latent_dim = 64;
    c.decoder_dim = 32;
    c.encoder_transformer_layers = {0, 0, 0, 1};
    c.head_dim = 16;
    c.n_codebooks = 3;
    c.codebook_size = 32;
    c.semantic_codebook_size = 64;
    TransformerConfig t;
    t.n_layer = 2;
    t.n_head = 4;
    t.dim = 64;
    t.intermediate = 128;
    t.head_dim = 16;
    t.window = 8;
    c.pre_module = t;
    c.post_module = t;
    return c;
}

}  // namespace duet::fish_codec
