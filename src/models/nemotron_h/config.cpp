#include "models/nemotron_h/config.h"

#include "models/config_fields.h"

#include <limits>

#include "base/error.h"

namespace duet::nemotron_h {

std::string_view layer_kind_name(LayerKind kind) {
    switch (kind) {
        case LayerKind::Mamba: return "mamba";
        case LayerKind::Attention: return "attention";
        case LayerKind::MoE: return "moe";
        case LayerKind::MLP: return "mlp";
    }
    return "?";
}

char layer_kind_symbol(LayerKind kind) {
    switch (kind) {
        case LayerKind::Mamba: return 'M';
        case LayerKind::Attention: return '*';
        case LayerKind::MoE: return 'E';
        case LayerKind::MLP: return '-';
    }
    return '?';
}

int64_t Config::count(LayerKind kind) const {
    int64_t n = 0;
    for (LayerKind k : layers) n += (k == kind);
    return n;
}

int64_t Config::parameter_count() const {
    int64_t total = 2 * vocab * hidden + hidden;  // embedding, LM head, final norm
    for (LayerKind k : layers) {
        total += hidden;  // the layer's norm
        switch (k) {
            case LayerKind::Mamba:
                total += in_proj_rows() * hidden + conv_dim() * (conv_kernel + 1) + 3 * mamba_heads +
                         mamba_inner() + hidden * mamba_inner();
                break;
            case LayerKind::Attention: total += 2 * (attn_heads + kv_heads) * head_dim * hidden; break;
            case LayerKind::MoE:
                total += experts * (hidden + 1) + experts * 2 * expert_inter * hidden + 2 * shared_inter * hidden;
                break;
            case LayerKind::MLP: total += 2 * mlp_inter * hidden; break;
        }
    }
    return total;
}

int64_t Config::draft_parameter_count() const {
    if (attn_heads == 0 || experts == 0) return 0;
    return 6 * hidden + 2 * hidden * hidden + 2 * (attn_heads + kv_heads) * head_dim * hidden +
           experts * (hidden + 1) + experts * 2 * expert_inter * hidden + 2 * shared_inter * hidden;
}

std::string Config::pattern() const {
    std::string out;
    for (LayerKind k : layers) out += layer_kind_symbol(k);
    return out;
}

namespace {

// Both spellings are in use: the hub's (`linear_attention`, `full_attention`) and the Transcribe
// LLM's (`mamba`, `attention`).
LayerKind layer_kind_from_name(std::string_view name, size_t index, std::string_view source) {
    if (name == "mamba" || name == "linear_attention" || name == "M") return LayerKind::Mamba;
    if (name == "attention" || name == "full_attention" || name == "*") return LayerKind::Attention;
    if (name == "moe" || name == "E") return LayerKind::MoE;
    if (name == "mlp" || name == "-") return LayerKind::MLP;
    fail(source, ": layers_block_type[", index, "] is '", name,
         "', expected one of mamba, linear_attention, attention, full_attention, moe, mlp");
}

std::vector<LayerKind> read_layers(const ConfigFields& f, std::string_view source) {
    if (const json::Value* types = f.find("layers_block_type"); types != nullptr && !types->is_null()) {
        require(types->is_array(), source, ": layers_block_type must be an array of layer kinds");
        std::vector<LayerKind> layers;
        for (size_t i = 0; i < types->items().size(); ++i) {
            const std::string& name =
                types->items()[i].as_string(str_cat(source, ": layers_block_type[", i, "]"));
            layers.push_back(layer_kind_from_name(name, i, source));
        }
        return layers;
    }
    if (const json::Value* pattern = f.find("hybrid_override_pattern"); pattern != nullptr) {
        return parse_layer_pattern(pattern->as_string(str_cat(source, ": hybrid_override_pattern")), source);
    }
    fail(source, ": missing layers_block_type (or the legacy hybrid_override_pattern)");
}

}  // namespace

std::vector<LayerKind> parse_layer_pattern(std::string_view pattern, std::string_view source) {
    std::vector<LayerKind> layers;
    for (size_t i = 0; i < pattern.size(); ++i) {
        switch (pattern[i]) {
            case 'M': layers.push_back(LayerKind::Mamba); break;
            case '*': layers.push_back(LayerKind::Attention); break;
            case 'E': layers.push_back(LayerKind::MoE); break;
            case '-': layers.push_back(LayerKind::MLP); break;
            default:
                fail(source, ": hybrid_override_pattern has '", pattern[i], "' at position ", i,
                     ", expected one of M (Mamba), * (attention), E (MoE), - (MLP)");
        }
    }
    return layers;
}

Config parse_config(const json::Value& root, std::string_view source) {
    require(root.is_object(), source, ": expected a JSON object");
    const json::Value* llm = root.find("llm_config");
    const json::Value& obj = (llm != nullptr && llm->is_object()) ? *llm : root;
    std::string where = llm != nullptr ? str_cat(source, ": llm_config") : std::string(source);
    ConfigFields f(obj, where);

    Config c;
    c.hidden = f.positive_int("hidden_size");
    c.vocab = f.positive_int("vocab_size");
    c.norm_eps = static_cast<float>(f.number_or("layer_norm_epsilon", 1e-5));
    c.layers = read_layers(f, where);

    if (c.count(LayerKind::Mamba) > 0) {
        c.mamba_heads = f.positive_int("mamba_num_heads");
        c.mamba_head_dim = f.positive_int("mamba_head_dim");
        c.mamba_groups = f.positive_int("n_groups");
        c.ssm_state = f.positive_int("ssm_state_size");
        c.conv_kernel = f.positive_int("conv_kernel");
        c.dt_min = 0.0f;
        c.dt_max = std::numeric_limits<float>::infinity();
        if (const json::Value* limit = f.find("time_step_limit"); limit != nullptr && !limit->is_null()) {
            require(limit->is_array() && limit->items().size() == 2, where,
                    ": time_step_limit must be [min, max]");
            c.dt_min = static_cast<float>(limit->items()[0].as_number(str_cat(where, ": time_step_limit[0]")));
            c.dt_max = static_cast<float>(limit->items()[1].as_number(str_cat(where, ": time_step_limit[1]")));
        }
    }
    if (c.count(LayerKind::Attention) > 0) {
        c.attn_heads = f.positive_int("num_attention_heads");
        c.kv_heads = f.positive_int("num_key_value_heads");
        c.head_dim = f.int_or("head_dim", 0);
        if (c.head_dim == 0) c.head_dim = c.hidden / c.attn_heads;
    }
    if (c.count(LayerKind::MoE) > 0) {
        c.experts = f.positive_int("n_routed_experts");
        c.experts_per_token = f.positive_int("num_experts_per_tok");
        c.expert_inter = f.positive_int("moe_intermediate_size");
        c.shared_inter = f.positive_int("moe_shared_expert_intermediate_size");
        c.expert_groups = f.int_or("n_group", 1);
        c.expert_groups_kept = f.int_or("topk_group", 1);
        c.routed_scale = static_cast<float>(f.number_or("routed_scaling_factor", 1.0));
        c.norm_topk = f.bool_or("norm_topk_prob", true);
    }
    if (c.count(LayerKind::MLP) > 0) c.mlp_inter = f.positive_int("intermediate_size");
    c.validate(where);
    return c;
}

Config load_config(const std::string& path) { return parse_config(json::parse_file(path), path); }

void Config::validate(std::string_view source) const {
    require(hidden > 0 && vocab > 0, source, ": hidden_size and vocab_size must be positive");
    require(!layers.empty(), source, ": the model has no layers");
    require(norm_eps > 0.0f, source, ": layer_norm_epsilon is ", norm_eps, ", expected > 0");
    if (count(LayerKind::Mamba) > 0) {
        require(mamba_heads > 0 && mamba_head_dim > 0 && mamba_groups > 0 && ssm_state > 0 && conv_kernel > 1,
                source, ": Mamba sizes must be positive (conv_kernel at least 2)");
        require(mamba_heads % mamba_groups == 0, source, ": mamba_num_heads (", mamba_heads,
                ") is not a multiple of n_groups (", mamba_groups, ")");
        require(!(dt_min > dt_max), source, ": time_step_limit [", dt_min, ", ", dt_max, "] is empty");
    }
    if (count(LayerKind::Attention) > 0) {
        require(attn_heads > 0 && kv_heads > 0 && head_dim > 0, source, ": attention sizes must be positive");
        require(attn_heads % kv_heads == 0, source, ": num_attention_heads (", attn_heads,
                ") is not a multiple of num_key_value_heads (", kv_heads, ")");
    }
    if (count(LayerKind::MoE) > 0) {
        require(experts > 0 && expert_inter > 0 && shared_inter > 0, source, ": MoE sizes must be positive");
        require(experts_per_token > 0 && experts_per_token <= experts, source, ": num_experts_per_tok (",
                experts_per_token, ") must be in [1, n_routed_experts = ", experts, "]");
        require(expert_groups > 0 && experts % expert_groups == 0, source, ": n_group (", expert_groups,
                ") must divide n_routed_experts (", experts, ")");
        require(expert_groups_kept > 0 && expert_groups_kept <= expert_groups, source, ": topk_group (",
                expert_groups_kept, ") must be in [1, n_group = ", expert_groups, "]");
        require(experts_per_token <= expert_groups_kept * (experts / expert_groups), source,
                ": num_experts_per_tok (", experts_per_token, ") exceeds the experts of the kept groups");
    }
    if (count(LayerKind::MLP) > 0) require(mlp_inter > 0, source, ": intermediate_size must be positive");
}

}  // namespace duet::nemotron_h
