#include "models/fish_codec/config.h"

#include <filesystem>

#include "base/error.h"
#include "models/config_fields.h"

namespace duet::fish_codec {

namespace {

TransformerConfig quantizer_transformer() {
    TransformerConfig t;
    t.n_layer = 8;
    t.n_head = 16;
    t.dim = 1024;
    t.intermediate = 3072;
    t.head_dim = 64;
    t.window = 128;
    return t;
}

std::vector<int64_t> int_list(const ConfigFields& f, const char* key, std::vector<int64_t> fallback) {
    const json::Value* v = f.find(key);
    if (v == nullptr) return fallback;
    require(v->is_array(), f.source(), ": ", key, " must be a list of integers");
    std::vector<int64_t> out;
    for (const json::Value& item : v->items()) out.push_back(item.as_int(str_cat(f.source(), ": ", key)));
    return out;
}

TransformerConfig read_transformer(const json::Value* obj, const std::string& source, TransformerConfig t,
                                   const Config& general) {
    t.rope_base = general.rope_base;
    t.norm_eps = general.norm_eps;
    if (obj == nullptr) return t;
    const ConfigFields f(*obj, source);
    t.n_layer = f.int_or("n_layer", t.n_layer);
    t.n_head = f.int_or("n_head", t.n_head);
    t.dim = f.int_or("dim", t.dim);
    t.intermediate = f.int_or("intermediate_size", t.intermediate);
    t.head_dim = f.int_or("head_dim", t.head_dim);
    t.window = f.int_or("window_size", t.window);
    t.rope_base = static_cast<float>(f.number_or("rope_base", t.rope_base));
    t.norm_eps = static_cast<float>(f.number_or("norm_eps", t.norm_eps));
    return t;
}

int64_t product(const std::vector<int64_t>& v) {
    int64_t p = 1;
    for (int64_t x : v) p *= x;
    return p;
}

void validate_transformer(const TransformerConfig& t, const std::string& what) {
    require(t.n_layer >= 0 && t.n_head > 0 && t.dim > 0 && t.intermediate > 0 && t.head_dim > 0 && t.window > 0, what,
            ": n_layer, n_head, dim, intermediate_size, head_dim and window_size must be positive");
    require(t.head_dim % 2 == 0, what, ": head_dim ", t.head_dim, " must be even for RoPE");
}

}  // namespace

int64_t Config::hop_length() const { return product(encoder_rates); }
int64_t Config::samples_per_frame() const { return product(decoder_rates) * product(downsample_factor); }

TransformerConfig Config::encoder_transformer(size_t block) const {
    TransformerConfig t;
    t.n_layer = encoder_transformer_layers[block];
    t.dim = encoder_block_dim(block);
    t.n_head = t.dim / 64;  // fixed in fish-speech's EncoderBlock
    t.intermediate = 3 * t.dim;
    t.head_dim = head_dim;
    t.window = encoder_window;
    t.rope_base = rope_base;
    t.norm_eps = norm_eps;
    return t;
}

Config real_config() {
    Config c;
    c.pre_module = quantizer_transformer();
    c.post_module = quantizer_transformer();
    return c;
}

Config parse_config(const json::Value& root, const std::string& source) {
    require(root.is_object(), source, ": expected a JSON object");
    Config c = real_config();
    const ConfigFields f(root, source);
    c.sample_rate = f.int_or("sample_rate", c.sample_rate);
    c.encoder_dim = f.int_or("encoder_dim", c.encoder_dim);
    c.encoder_rates = int_list(f, "encoder_rates", c.encoder_rates);
    c.decoder_dim = f.int_or("decoder_dim", c.decoder_dim);
    c.decoder_rates = int_list(f, "decoder_rates", c.decoder_rates);
    c.encoder_transformer_layers = int_list(f, "encoder_transformer_layers", c.encoder_transformer_layers);
    c.latent_dim = f.int_or("latent_dim", c.encoder_dim << c.encoder_rates.size());
    require(f.bool_or("causal", true), source, ": only the causal codec is supported");
    if (const json::Value* general = f.find("transformer_general_config")) {
        const ConfigFields g(*general, str_cat(source, ": transformer_general_config"));
        c.head_dim = g.int_or("head_dim", c.head_dim);
        c.rope_base = static_cast<float>(g.number_or("rope_base", c.rope_base));
        c.norm_eps = static_cast<float>(g.number_or("norm_eps", c.norm_eps));
        c.encoder_window = g.int_or("window_size", c.encoder_window);
    }
    const json::Value* quantizer = f.find("quantizer");
    TransformerConfig pre = quantizer_transformer(), post = quantizer_transformer();
    const json::Value* pre_obj = nullptr;
    const json::Value* post_obj = nullptr;
    if (quantizer != nullptr) {
        const ConfigFields q(*quantizer, str_cat(source, ": quantizer"));
        const int64_t input_dim = q.int_or("input_dim", c.latent_dim);
        require(input_dim == c.latent_dim, source, ": quantizer input_dim ", input_dim, " differs from latent_dim ",
                c.latent_dim);
        c.n_codebooks = q.int_or("n_codebooks", c.n_codebooks);
        c.codebook_size = q.int_or("codebook_size", c.codebook_size);
        c.codebook_dim = q.int_or("codebook_dim", c.codebook_dim);
        c.semantic_codebook_size = q.int_or("semantic_codebook_size", c.semantic_codebook_size);
        c.downsample_factor = int_list(q, "downsample_factor", c.downsample_factor);
        pre_obj = q.find("pre_module");
        post_obj = q.find("post_module");
    }
    c.pre_module = read_transformer(pre_obj, str_cat(source, ": quantizer.pre_module"), pre, c);
    c.post_module = read_transformer(post_obj, str_cat(source, ": quantizer.post_module"), post, c);
    validate(c, source);
    return c;
}

Config load_config_for(const std::string& dir) {
    const std::string path = (std::filesystem::path(dir) / "codec_config.json").string();
    if (!std::filesystem::exists(path)) return real_config();
    return parse_config(json::parse_file(path), path);
}

void validate(const Config& c, const std::string& source) {
    require(c.sample_rate > 0 && c.encoder_dim > 0 && c.latent_dim > 0 && c.decoder_dim > 0, source,
            ": sample_rate, encoder_dim, latent_dim and decoder_dim must be positive");
    require(!c.encoder_rates.empty() && c.encoder_rates.size() <= 8 && !c.decoder_rates.empty() &&
                c.decoder_rates.size() <= 8,
            source, ": encoder_rates and decoder_rates need 1 to 8 entries");
    for (const auto* rates : {&c.encoder_rates, &c.decoder_rates, &c.downsample_factor})
        for (int64_t r : *rates) require(r >= 1 && r <= 64, source, ": rate ", r, " outside 1..64");
    require(c.encoder_transformer_layers.size() == c.encoder_rates.size(), source,
            ": encoder_transformer_layers needs one entry per encoder rate");
    require(c.decoder_dim % (int64_t{1} << c.decoder_rates.size()) == 0, source, ": decoder_dim ", c.decoder_dim,
            " must halve ", c.decoder_rates.size(), " times");
    require(c.hop_length() == product(c.decoder_rates), source, ": encoder and decoder rates give different hops (",
            c.hop_length(), " and ", product(c.decoder_rates), ")");
    require(c.n_codebooks >= 1 && c.codebook_size >= 1 && c.codebook_dim >= 1 && c.semantic_codebook_size >= 1, source,
            ": codebook sizes must be positive");
    require(c.head_dim > 0 && c.head_dim % 2 == 0 && c.encoder_window > 0, source,
            ": transformer head_dim must be positive and even, window_size positive");
    for (size_t b = 0; b < c.encoder_rates.size(); ++b) {
        require(c.encoder_transformer_layers[b] >= 0, source, ": negative encoder_transformer_layers");
        if (c.encoder_transformer_layers[b] > 0)
            require(c.encoder_block_dim(b) >= 64, source, ": encoder block ", b, " has ", c.encoder_block_dim(b),
                    " channels, too few for a transformer (n_head = dim / 64)");
    }
    validate_transformer(c.pre_module, str_cat(source, ": quantizer.pre_module"));
    validate_transformer(c.post_module, str_cat(source, ": quantizer.post_module"));
    for (const TransformerConfig* t : {&c.pre_module, &c.post_module})
        require(t->dim == c.latent_dim, source, ": quantizer transformer dim ", t->dim, " differs from latent_dim ",
                c.latent_dim, " (input projections are not supported)");
    require(c.encoder_block_dim(c.encoder_rates.size() - 1) > 0, source, ": encoder_dim too small");
}

}  // namespace duet::fish_codec
