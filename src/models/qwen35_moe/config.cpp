#include "models/qwen35_moe/config.h"

#include "models/config_fields.h"

#include "base/error.h"

namespace duet::qwen35_moe {

std::string_view layer_kind_name(LayerKind kind) {
    return kind == LayerKind::LinearAttention ? "linear_attention" : "full_attention";
}

int64_t Config::count(LayerKind kind) const {
    int64_t n = 0;
    for (LayerKind k : layers) n += (k == kind);
    return n;
}

int64_t Config::parameter_count() const {
    int64_t total = (tie_embeddings ? 1 : 2) * vocab * hidden + hidden;  // embedding, LM head, final norm
    const int64_t moe = experts * hidden + experts * 3 * expert_inter * hidden + 3 * shared_inter * hidden + hidden;
    for (LayerKind k : layers) {
        total += 2 * hidden + moe;  // the two norms and the MoE
        if (k == LayerKind::LinearAttention) {
            total += conv_dim() * hidden + linear_v_width() * hidden + 2 * linear_v_heads * hidden  // qkv, z, b, a
                     + conv_dim() * conv_kernel + 2 * linear_v_heads + linear_v_dim  // conv, A_log, dt_bias, norm
                     + hidden * linear_v_width();                                    // out_proj
        } else {
            total += 2 * attn_heads * head_dim * hidden + 2 * kv_heads * head_dim * hidden +
                     hidden * attn_heads * head_dim + 2 * head_dim;
        }
    }
    return total;
}

std::string Config::pattern() const {
    std::string out;
    for (LayerKind k : layers) out += (k == LayerKind::LinearAttention ? 'L' : 'F');
    return out;
}

std::vector<LayerKind> parse_layer_pattern(std::string_view pattern, std::string_view source) {
    std::vector<LayerKind> layers;
    for (size_t i = 0; i < pattern.size(); ++i) {
        require(pattern[i] == 'L' || pattern[i] == 'F', source, ": layer pattern has '", pattern[i],
                "' at position ", i, ", expected L (linear attention) or F (full attention)");
        layers.push_back(pattern[i] == 'L' ? LayerKind::LinearAttention : LayerKind::FullAttention);
    }
    return layers;
}

std::vector<LayerKind> default_layer_kinds(int64_t layers, int64_t interval) {
    std::vector<LayerKind> kinds;
    for (int64_t i = 0; i < layers; ++i) {
        kinds.push_back((i + 1) % interval == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention);
    }
    return kinds;
}

namespace {

std::vector<LayerKind> read_layers(const ConfigFields& f) {
    const int64_t count = f.positive_int("num_hidden_layers");
    const json::Value* types = f.find("layer_types");
    if (types == nullptr) {
        return default_layer_kinds(count, static_cast<int64_t>(f.number_or("full_attention_interval", 4)));
    }
    require(types->is_array(), f.source(), ": layer_types must be an array of layer kinds");
    const auto& items = types->items();
    require(static_cast<int64_t>(items.size()) == count, f.source(), ": layer_types has ", items.size(),
            " entries but num_hidden_layers is ", count);
    std::vector<LayerKind> layers;
    for (size_t i = 0; i < items.size(); ++i) {
        const std::string& name = items[i].as_string(str_cat(f.source(), ": layer_types[", i, "]"));
        if (name == "linear_attention") {
            layers.push_back(LayerKind::LinearAttention);
        } else if (name == "full_attention") {
            layers.push_back(LayerKind::FullAttention);
        } else {
            fail(f.source(), ": layer_types[", i, "] is '", name, "', expected linear_attention or full_attention");
        }
    }
    return layers;
}

// RoPE settings live in `rope_parameters` (transformers 5) or at the top level (older configs).
void read_rope(const ConfigFields& f, Config& c) {
    const json::Value* rope = f.find("rope_parameters");
    if (rope == nullptr) rope = f.find("rope_scaling");
    const json::Value none = json::Value::object();
    const ConfigFields inner(rope != nullptr && rope->is_object() ? *rope : none,
                       f.source() + ": rope_parameters");
    c.rope_theta = inner.number_or("rope_theta", f.number_or("rope_theta", 0.0));
    require(c.rope_theta > 0.0, f.source(), ": missing rope_parameters.rope_theta (expected a positive number)");
    c.partial_rotary = inner.number_or("partial_rotary_factor", f.number_or("partial_rotary_factor", 0.25));
}

}  // namespace

Config parse_config(const json::Value& root, std::string_view source) {
    require(root.is_object(), source, ": expected a JSON object");
    const json::Value* text = root.find("text_config");
    const bool nested = text != nullptr && text->is_object();
    const ConfigFields f(nested ? *text : root, nested ? str_cat(source, ": text_config") : std::string(source));

    Config c;
    c.hidden = f.positive_int("hidden_size");
    c.vocab = f.positive_int("vocab_size");
    c.norm_eps = static_cast<float>(f.number_or("rms_norm_eps", 1e-6));
    c.tie_embeddings = f.bool_or("tie_word_embeddings", false);
    c.layers = read_layers(f);
    if (c.count(LayerKind::LinearAttention) > 0) {
        c.linear_k_heads = f.positive_int("linear_num_key_heads");
        c.linear_v_heads = f.positive_int("linear_num_value_heads");
        c.linear_k_dim = f.positive_int("linear_key_head_dim");
        c.linear_v_dim = f.positive_int("linear_value_head_dim");
        c.conv_kernel = f.positive_int("linear_conv_kernel_dim");
    }
    if (c.count(LayerKind::FullAttention) > 0) {
        c.attn_heads = f.positive_int("num_attention_heads");
        c.kv_heads = f.positive_int("num_key_value_heads");
        c.head_dim = f.positive_int("head_dim");
        read_rope(f, c);
    }
    c.experts = f.positive_int("num_experts");
    c.experts_per_token = f.positive_int("num_experts_per_tok");
    c.expert_inter = f.positive_int("moe_intermediate_size");
    c.shared_inter = f.positive_int("shared_expert_intermediate_size");
    c.norm_topk = f.bool_or("norm_topk_prob", true);
    c.validate(f.source());
    return c;
}

Config load_config(const std::string& path) { return parse_config(json::parse_file(path), path); }

json::Value config_to_json(const Config& c) {
    json::Value j = json::Value::object();
    j.set("model_type", json::Value("qwen3_5_moe_text"));
    j.set("hidden_size", json::Value(c.hidden));
    j.set("vocab_size", json::Value(c.vocab));
    j.set("rms_norm_eps", json::Value(static_cast<double>(c.norm_eps)));
    j.set("tie_word_embeddings", json::Value(c.tie_embeddings));
    j.set("num_hidden_layers", json::Value(static_cast<int64_t>(c.layers.size())));
    json::Value kinds = json::Value::array();
    for (LayerKind k : c.layers) kinds.push(json::Value(std::string(layer_kind_name(k))));
    j.set("layer_types", kinds);
    j.set("linear_num_key_heads", json::Value(c.linear_k_heads));
    j.set("linear_num_value_heads", json::Value(c.linear_v_heads));
    j.set("linear_key_head_dim", json::Value(c.linear_k_dim));
    j.set("linear_value_head_dim", json::Value(c.linear_v_dim));
    j.set("linear_conv_kernel_dim", json::Value(c.conv_kernel));
    j.set("num_attention_heads", json::Value(c.attn_heads));
    j.set("num_key_value_heads", json::Value(c.kv_heads));
    j.set("head_dim", json::Value(c.head_dim));
    json::Value rope = json::Value::object();
    rope.set("rope_theta", json::Value(c.rope_theta));
    rope.set("partial_rotary_factor", json::Value(c.partial_rotary));
    j.set("rope_parameters", rope);
    j.set("num_experts", json::Value(c.experts));
    j.set("num_experts_per_tok", json::Value(c.experts_per_token));
    j.set("moe_intermediate_size", json::Value(c.expert_inter));
    j.set("shared_expert_intermediate_size", json::Value(c.shared_inter));
    j.set("norm_topk_prob", json::Value(c.norm_topk));
    return j;
}

void Config::validate(std::string_view source) const {
    require(hidden > 0 && vocab > 0, source, ": hidden_size and vocab_size must be positive");
    require(!layers.empty(), source, ": the model has no layers");
    require(norm_eps > 0.0f, source, ": rms_norm_eps is ", norm_eps, ", expected > 0");
    if (count(LayerKind::LinearAttention) > 0) {
        require(linear_k_heads > 0 && linear_v_heads > 0 && linear_k_dim > 0 && linear_v_dim > 0 && conv_kernel > 1,
                source, ": Gated DeltaNet sizes must be positive (linear_conv_kernel_dim at least 2)");
        require(linear_v_heads % linear_k_heads == 0, source, ": linear_num_value_heads (", linear_v_heads,
                ") is not a multiple of linear_num_key_heads (", linear_k_heads, ")");
    }
    if (count(LayerKind::FullAttention) > 0) {
        require(attn_heads > 0 && kv_heads > 0 && head_dim > 0, source, ": attention sizes must be positive");
        require(attn_heads % kv_heads == 0, source, ": num_attention_heads (", attn_heads,
                ") is not a multiple of num_key_value_heads (", kv_heads, ")");
        require(partial_rotary >= 0.0 && partial_rotary <= 1.0 && rotary_dim() % 2 == 0, source,
                ": partial_rotary_factor ", partial_rotary, " gives ", rotary_dim(), " rotary dims of head_dim ",
                head_dim, ", expected an even number at most head_dim");
        require(rope_theta > 0.0, source, ": rope_theta is ", rope_theta, ", expected > 0");
    }
    require(experts > 0 && expert_inter > 0 && shared_inter > 0, source, ": MoE sizes must be positive");
    require(experts_per_token > 0 && experts_per_token <= experts, source, ": num_experts_per_tok (",
            experts_per_token, ") must be in [1, num_experts = ", experts, "]");
}

}  // namespace duet::qwen35_moe
