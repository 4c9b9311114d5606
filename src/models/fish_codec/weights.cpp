#include "models/fish_codec/weights.h"

#include <cmath>

#include "base/error.h"
#include "io/safetensors.h"

namespace duet::fish_codec {

namespace {

class Loader {
public:
    Loader(const TensorLookup& lookup, const std::string& source) : lookup_(lookup), source_(source) {}

    // The tensor `name` with exactly `shape`, as f32; zeros and a recorded problem when it is not there.
    std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& shape) {
        const TensorEntry* t = lookup_(name);
        if (t == nullptr) return missing(name, shape);
        return checked(*t, shape);
    }

    // A weight under `prefix`.weight, or weight-normed as g · v / ‖v‖ (norm over all dims but the first).
    std::vector<float> weight(const std::string& prefix, const std::vector<int64_t>& shape) {
        if (const TensorEntry* plain = lookup_(prefix + ".weight")) return checked(*plain, shape);
        for (const auto& [g_name, v_name] :
             {std::pair{".parametrizations.weight.original0", ".parametrizations.weight.original1"},
              std::pair{".weight_g", ".weight_v"}}) {
            const TensorEntry* g = lookup_(prefix + g_name);
            const TensorEntry* v = lookup_(prefix + v_name);
            if (g == nullptr || v == nullptr) continue;
            std::vector<int64_t> g_shape(shape.size(), 1);
            g_shape[0] = shape[0];
            const std::vector<float> gains = checked(*g, g_shape);
            std::vector<float> w = checked(*v, shape);
            const size_t rows = static_cast<size_t>(shape[0]), per_row = w.size() / rows;
            for (size_t r = 0; r < rows; ++r) {
                float* row = w.data() + r * per_row;
                double squares = 0.0;
                for (size_t i = 0; i < per_row; ++i) squares += static_cast<double>(row[i]) * row[i];
                const float scale = gains[r] / static_cast<float>(std::sqrt(squares));
                for (size_t i = 0; i < per_row; ++i) row[i] *= scale;
            }
            return w;
        }
        return missing(prefix + ".weight (or its weight-norm parametrization)", shape);
    }

    void finish() const {
        if (problems_.empty()) return;
        std::string message = str_cat(source_, ": ", problems_.size(), " problem(s) with the codec weights:");
        for (const std::string& p : problems_) message += "\n  " + p;
        fail(message);
    }

private:
    std::vector<float> missing(const std::string& name, const std::vector<int64_t>& shape) {
        problems_.push_back(str_cat("missing tensor '", name, "' ", shape_to_string(shape)));
        return zeros(shape);
    }
    std::vector<float> checked(const TensorEntry& t, const std::vector<int64_t>& shape) {
        if (t.shape != shape) {
            problems_.push_back(str_cat("tensor '", t.name, "' has shape ", shape_to_string(t.shape), ", expected ",
                                        shape_to_string(shape)));
            return zeros(shape);
        }
        if (!dtype_is_float(t.dtype)) {
            problems_.push_back(str_cat("tensor '", t.name, "' has dtype ", dtype_name(t.dtype), ", expected a float"));
            return zeros(shape);
        }
        return read_f32(t);
    }
    static std::vector<float> zeros(const std::vector<int64_t>& shape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return std::vector<float>(static_cast<size_t>(n), 0.0f);
    }

    const TensorLookup& lookup_;
    const std::string& source_;
    std::vector<std::string> problems_;
};

// torch Conv1d weight [out, in, k] → [out, k, in].
Conv conv(Loader& l, const std::string& prefix, int64_t in, int64_t out, int64_t kernel, int64_t dilation = 1,
          int64_t stride = 1) {
    Conv c;
    c.in = in, c.out = out, c.kernel = kernel, c.dilation = dilation, c.stride = stride;
    const std::vector<float> w = l.weight(prefix + ".conv", {out, in, kernel});
    c.weight.resize(w.size());
    for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i)
            for (int64_t k = 0; k < kernel; ++k)
                c.weight[static_cast<size_t>((o * kernel + k) * in + i)] = w[static_cast<size_t>((o * in + i) * kernel + k)];
    c.bias = l.tensor(prefix + ".conv.bias", {out});
    return c;
}

// torch ConvTranspose1d weight [in, out, k] → [k, out, in] (weight norm runs over dim 0, the input).
ConvTranspose conv_transpose(Loader& l, const std::string& prefix, int64_t in, int64_t out, int64_t kernel,
                             int64_t stride) {
    ConvTranspose c;
    c.in = in, c.out = out, c.kernel = kernel, c.stride = stride;
    const std::vector<float> w = l.weight(prefix + ".conv", {in, out, kernel});
    c.weight.resize(w.size());
    for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o)
            for (int64_t k = 0; k < kernel; ++k)
                c.weight[static_cast<size_t>((k * out + o) * in + i)] = w[static_cast<size_t>((i * out + o) * kernel + k)];
    c.bias = l.tensor(prefix + ".conv.bias", {out});
    return c;
}

Snake snake(Loader& l, const std::string& prefix, int64_t channels) {
    Snake s;
    s.alpha = l.tensor(prefix + ".alpha", {1, channels, 1});
    s.inv_alpha.resize(s.alpha.size());
    for (size_t c = 0; c < s.alpha.size(); ++c) s.inv_alpha[c] = 1.0f / (s.alpha[c] + 1e-9f);
    return s;
}

ResidualUnit residual_unit(Loader& l, const std::string& prefix, int64_t dim, int64_t dilation) {
    return {snake(l, prefix + ".block.0", dim), conv(l, prefix + ".block.1", dim, dim, 7, dilation),
            snake(l, prefix + ".block.2", dim), conv(l, prefix + ".block.3", dim, dim, 1)};
}

std::array<ResidualUnit, 3> residual_units(Loader& l, const std::string& prefix, int first, int64_t dim) {
    return {residual_unit(l, str_cat(prefix, ".block.", first), dim, 1),
            residual_unit(l, str_cat(prefix, ".block.", first + 1), dim, 3),
            residual_unit(l, str_cat(prefix, ".block.", first + 2), dim, 9)};
}

Linear linear(Loader& l, const std::string& name, int64_t in, int64_t out, bool bias) {
    Linear lin;
    lin.in = in, lin.out = out;
    const std::vector<float> w = l.tensor(name + ".weight", {out, in});
    lin.weight.assign(w.begin(), w.end());
    if (bias) lin.bias = l.tensor(name + ".bias", {out});
    return lin;
}

ConvNeXt convnext(Loader& l, const std::string& prefix, int64_t dim) {
    ConvNeXt b;
    b.dwconv.channels = dim;
    b.dwconv.kernel = 7;
    const std::vector<float> w = l.tensor(prefix + ".dwconv.conv.weight", {dim, 1, 7});
    b.dwconv.weight.resize(w.size());
    for (int64_t c = 0; c < dim; ++c)
        for (int64_t k = 0; k < 7; ++k) b.dwconv.weight[static_cast<size_t>(k * dim + c)] = w[static_cast<size_t>(c * 7 + k)];
    b.dwconv.bias = l.tensor(prefix + ".dwconv.conv.bias", {dim});
    b.norm_weight = l.tensor(prefix + ".norm.weight", {dim});
    b.norm_bias = l.tensor(prefix + ".norm.bias", {dim});
    b.pwconv1 = linear(l, prefix + ".pwconv1", dim, 4 * dim, true);
    b.pwconv2 = linear(l, prefix + ".pwconv2", 4 * dim, dim, true);
    b.gamma = l.tensor(prefix + ".gamma", {dim});
    return b;
}

Transformer transformer(Loader& l, const std::string& prefix, const TransformerConfig& c) {
    Transformer t;
    t.config = c;
    const int64_t d = c.dim, a = c.attn_width();
    for (int64_t i = 0; i < c.n_layer; ++i) {
        const std::string p = str_cat(prefix, ".layers.", i);
        TransformerLayer layer;
        layer.wqkv = linear(l, p + ".attention.wqkv", d, 3 * a, false);
        layer.wo = linear(l, p + ".attention.wo", a, d, false);
        layer.w1 = linear(l, p + ".feed_forward.w1", d, c.intermediate, false);
        layer.w3 = linear(l, p + ".feed_forward.w3", d, c.intermediate, false);
        layer.w2 = linear(l, p + ".feed_forward.w2", c.intermediate, d, false);
        layer.attention_norm = l.tensor(p + ".attention_norm.weight", {d});
        layer.ffn_norm = l.tensor(p + ".ffn_norm.weight", {d});
        layer.attention_scale = l.tensor(p + ".attention_layer_scale.gamma", {d});
        layer.ffn_scale = l.tensor(p + ".ffn_layer_scale.gamma", {d});
        t.layers.push_back(std::move(layer));
    }
    t.norm = l.tensor(prefix + ".norm.weight", {d});
    return t;
}

Codebook codebook(Loader& l, const std::string& prefix, int64_t latent, int64_t size, int64_t dim) {
    Codebook cb;
    cb.size = size, cb.dim = dim;
    cb.in_proj.in = latent, cb.in_proj.out = dim;
    const std::vector<float> in_proj = l.weight(prefix + ".in_proj", {dim, latent, 1});
    cb.in_proj.weight.assign(in_proj.begin(), in_proj.end());
    cb.in_proj.bias = l.tensor(prefix + ".in_proj.bias", {dim});
    cb.out_proj.in = dim, cb.out_proj.out = latent;
    const std::vector<float> out_proj = l.weight(prefix + ".out_proj", {latent, dim, 1});
    cb.out_proj.weight.assign(out_proj.begin(), out_proj.end());
    cb.out_proj.bias = l.tensor(prefix + ".out_proj.bias", {latent});
    cb.entries = l.tensor(prefix + ".codebook.weight", {size, dim});
    cb.normalized = cb.entries;
    for (int64_t r = 0; r < size; ++r) {
        float* row = cb.normalized.data() + r * dim;
        float squares = 0.0f;
        for (int64_t i = 0; i < dim; ++i) squares += row[i] * row[i];
        const float norm = std::max(std::sqrt(squares), 1e-12f);  // F.normalize
        for (int64_t i = 0; i < dim; ++i) row[i] /= norm;
    }
    return cb;
}

}  // namespace

Weights bind_weights(const Config& c, const TensorLookup& lookup, const std::string& source) {
    Loader l(lookup, source);
    Weights w;

    w.encoder_in = conv(l, "encoder.block.0", 1, c.encoder_dim, 7);
    const size_t n_enc = c.encoder_rates.size();
    for (size_t b = 0; b < n_enc; ++b) {
        const std::string p = str_cat("encoder.block.", b + 1);
        const int64_t dim = c.encoder_block_dim(b), stride = c.encoder_rates[b];
        EncoderBlock block;
        block.units = residual_units(l, p, 0, dim / 2);
        block.snake = snake(l, p + ".block.3", dim / 2);
        block.downsample = conv(l, p + ".block.4", dim / 2, dim, 2 * stride, 1, stride);
        if (c.encoder_transformer_layers[b] > 0) {
            block.has_transformer = true;
            block.transformer = transformer(l, p + ".block.5", c.encoder_transformer(b));
        }
        w.encoder_blocks.push_back(std::move(block));
    }
    const int64_t encoder_top = c.encoder_block_dim(n_enc - 1);
    w.encoder_snake = snake(l, str_cat("encoder.block.", n_enc + 1), encoder_top);
    w.encoder_out = conv(l, str_cat("encoder.block.", n_enc + 2), encoder_top, c.latent_dim, 3);

    const int64_t latent = c.latent_dim;
    w.semantic.push_back(codebook(l, "quantizer.semantic_quantizer.quantizers.0", latent, c.semantic_codebook_size,
                                  c.codebook_dim));
    for (int64_t i = 0; i < c.n_codebooks; ++i)
        w.residual.push_back(
            codebook(l, str_cat("quantizer.quantizer.quantizers.", i), latent, c.codebook_size, c.codebook_dim));
    const size_t n_resample = c.downsample_factor.size();
    for (size_t i = 0; i < n_resample; ++i) {
        const std::string p = str_cat("quantizer.downsample.", i);
        Resample r;
        const int64_t f = c.downsample_factor[i];
        r.down = conv(l, p + ".0", latent, latent, f, 1, f);
        r.block = convnext(l, p + ".1", latent);
        w.downsample.push_back(std::move(r));
    }
    // upsample.j undoes downsample step n - 1 - j.
    for (size_t j = 0; j < n_resample; ++j) {
        const std::string p = str_cat("quantizer.upsample.", j);
        Resample r;
        const int64_t f = c.downsample_factor[n_resample - 1 - j];
        r.up = conv_transpose(l, p + ".0", latent, latent, f, f);
        r.block = convnext(l, p + ".1", latent);
        w.upsample.push_back(std::move(r));
    }
    w.pre_module = transformer(l, "quantizer.pre_module", c.pre_module);
    w.post_module = transformer(l, "quantizer.post_module", c.post_module);

    w.decoder_in = conv(l, "decoder.model.0", latent, c.decoder_dim, 7);
    const size_t n_dec = c.decoder_rates.size();
    for (size_t b = 0; b < n_dec; ++b) {
        const std::string p = str_cat("decoder.model.", b + 1);
        const int64_t in = c.decoder_dim >> b, out = c.decoder_block_dim(b), stride = c.decoder_rates[b];
        DecoderBlock block;
        block.snake = snake(l, p + ".block.0", in);
        block.upsample = conv_transpose(l, p + ".block.1", in, out, 2 * stride, stride);
        block.units = residual_units(l, p, 2, out);
        w.decoder_blocks.push_back(std::move(block));
    }
    const int64_t decoder_top = c.decoder_block_dim(n_dec - 1);
    w.decoder_snake = snake(l, str_cat("decoder.model.", n_dec + 1), decoder_top);
    w.decoder_out = conv(l, str_cat("decoder.model.", n_dec + 2), decoder_top, 1, 7);
    l.finish();
    return w;
}

std::vector<float> code_squares(const Codebook& cb) {
    std::vector<float> squares(static_cast<size_t>(cb.size));
    for (int64_t k = 0; k < cb.size; ++k) {
        float s = 0.0f;
        for (int64_t i = 0; i < cb.dim; ++i) {
            const float v = cb.normalized[static_cast<size_t>(k * cb.dim + i)];
            s += v * v;
        }
        squares[static_cast<size_t>(k)] = s;
    }
    return squares;
}

}  // namespace duet::fish_codec
