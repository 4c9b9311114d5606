#include "models/qwen35_moe/model.h"

#include "models/forward_support.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "io/safetensors.h"
#include "models/normed_input.h"

namespace duet::qwen35_moe {

Model Model::load(const std::string& dir) {
    const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
    require(std::filesystem::exists(config_path), dir, ": no config.json (expected a model directory)");
    Config config = load_config(config_path);
    auto checkpoint = std::make_shared<Checkpoint>(Checkpoint::open(dir));
    const Checkpoint* ck = checkpoint.get();
    return bind(config, [ck](std::string_view name) { return ck->find(name); }, dir, ck->size(),
                ck->total_bytes(), checkpoint);
}

Model Model::from_tensors(const Config& config, std::shared_ptr<const TensorSet> tensors) {
    const TensorSet* set = tensors.get();
    return bind(config, [set](std::string_view name) { return set->find(name); }, "random weights",
                set->all().size(), set->total_bytes(), tensors);
}

Model Model::bind(const Config& config, const TensorLookup& lookup, const std::string& source,
                  size_t tensor_count, size_t tensor_bytes, std::shared_ptr<const void> keep_alive) {
    WeightBinder binder(lookup, source);
    Layout layout = detect_layout(binder, source);
    Weights weights = bind_weights(config, binder, layout);
    weights.storage.push_back(std::move(keep_alive));
    return Model(config, std::move(weights), std::move(layout), tensor_count, tensor_bytes);
}

namespace {

GatedAttentionShape attention_shape(const Config& c) {
    GatedAttentionShape shape;
    shape.heads = c.attn_heads;
    shape.kv_heads = c.kv_heads;
    shape.head_dim = c.head_dim;
    shape.rotary_dim = c.rotary_dim();
    shape.theta = static_cast<float>(c.rope_theta);
    shape.eps = c.norm_eps;
    return shape;
}

// Scratch activations for one forward call of n tokens.
struct Scratch {
    Scratch(const Config& c, Backend& b, int64_t n) : attention(b, attention_shape(c), n) {
        auto make = [&](int64_t width) { return b.alloc(static_cast<size_t>(n * std::max<int64_t>(width, 1))); };
        h = make(c.hidden);
        normed = make(c.hidden);
        projected = make(c.conv_dim());
        conv_out = make(c.conv_dim());
        gate = make(c.linear_v_width());
        inner = make(c.linear_v_width());
        beta_in = make(c.linear_v_heads);
        decay_in = make(c.linear_v_heads);
    }
    Buffer h, normed, projected, conv_out, gate, inner, beta_in, decay_in;
    GatedAttentionScratch attention;
};

// h += Gated DeltaNet(xn).
void linear_attention_mixer(const Config& c, Backend& b, const LinearAttentionWeights& w, State& s, int64_t slot,
                            const NormedInput& xn, int64_t chunk, Scratch& sc, float* h) {
    const int64_t n = xn.tokens(), conv_dim = c.conv_dim(), v_width = c.linear_v_width();
    xn.products({{w.qkv, sc.projected.data()}, {w.z, sc.gate.data()}, {w.b, sc.beta_in.data()},
                 {w.a, sc.decay_in.data()}});
    b.mark("delta: norm, in_proj", Backend::MarkLevel::Op);
    DeltaMiddleArgs m;
    m.conv.x = sc.projected.data();
    m.conv.x_stride = conv_dim;
    m.conv.channels = conv_dim;
    m.conv.kernel = c.conv_kernel;
    m.conv.taps = w.conv_taps.data();
    m.conv.ring = s.conv_ring(slot);
    m.conv.out = sc.conv_out.data();
    GatedDeltaArgs& d = m.rule;
    d.n = n;
    d.k_heads = c.linear_k_heads;
    d.v_heads = c.linear_v_heads;
    d.k_dim = c.linear_k_dim;
    d.v_dim = c.linear_v_dim;
    d.qkv = sc.conv_out.data();
    d.qkv_stride = conv_dim;
    d.a = sc.decay_in.data();
    d.a_stride = c.linear_v_heads;
    d.b = sc.beta_in.data();
    d.b_stride = c.linear_v_heads;
    d.neg_exp_a_log = w.neg_exp_a_log.data();
    d.dt_bias = w.dt_bias.data();
    d.state = s.delta_state(slot);
    d.out = sc.inner.data();
    d.chunk = n > 1 ? chunk : 0;
    m.z = sc.gate.data();
    m.z_stride = v_width;
    m.norm_weight = w.norm.data();
    m.eps = c.norm_eps;
    b.delta_conv_rule_norm(m);
    b.mark("delta: conv, rule, gated norm", Backend::MarkLevel::Op);
    b.matmul_fused(w.out, sc.inner.data(), n, h, FusedProduct{nullptr, 0.0f, true});
}

// h += gated attention(xn).
void full_attention_mixer(const Config& c, Backend& b, const FullAttentionWeights& w, State& s, int64_t slot,
                          const NormedInput& xn, const StepPosition& at, Scratch& sc, float* h) {
    gated_attention(b, attention_shape(c), w, xn, at, s.keys(slot), s.values(slot), sc.attention, h);
}

}  // namespace

std::vector<float> Model::forward(Backend& b, State& s, std::span<const int32_t> ids, bool all_logits,
                                  const HiddenHook& hook, int64_t delta_rule_chunk) const {
    require_forward_fits(ids, config_.vocab, s);
    const int64_t n = static_cast<int64_t>(ids.size());
    if (n == 1 && !hook) {
        decode_step(b, s, ids[0]);
        return s.step().read_output(b, config_.vocab);
    }
    Buffer rows = b.alloc(static_cast<size_t>(n * config_.hidden));
    b.embed(weights_.embed, ids.data(), n, rows.data());
    forward_rows(b, s, rows.data(), n, rows.data(), hook, delta_rule_chunk);
    return lm_head_logits(b, weights_.lm_head, rows.data(), n, all_logits ? n : 1);
}

void Model::decode_step(Backend& b, State& s, int32_t id) const {
    StepSlots& slots = s.step();
    slots.set(b, id, s.position());
    const StepPosition at{s.position(), slots.position(), s.capacity()};
    b.run_step(slots.key(), [&] {
        Buffer row = b.alloc(static_cast<size_t>(config_.hidden));
        EmbeddingGather g;
        g.ids = slots.id();
        b.gather_embeddings(weights_.embed, g, 1, row.data());
        step_row(b, s, row.data(), row.data(), at);
        b.matmul(weights_.lm_head, row.data(), 1, slots.output());
        slots.choose_greedy(b, config_.vocab);
        return static_cast<const float*>(slots.output());
    });
    s.advance(1);
}

void Model::step_row(Backend& b, State& s, const float* row, float* normed, const StepPosition& at) const {
    run_layers(b, s, row, 1, normed, at, {}, 0);
}

void Model::forward_rows(Backend& b, State& s, const float* rows, int64_t n, float* normed, const HiddenHook& hook,
                         int64_t delta_rule_chunk) const {
    require(n > 0 && n <= s.room(), "qwen35_moe: ", n, " input rows do not fit the state (", s.room(), " of ",
            s.capacity(), " positions left)");
    run_layers(b, s, rows, n, normed, StepPosition{s.position(), nullptr, s.capacity()}, hook, delta_rule_chunk);
    s.advance(n);
}

void Model::run_layers(Backend& b, State& s, const float* rows, int64_t n, float* normed, const StepPosition& at,
                       const HiddenHook& hook, int64_t delta_rule_chunk) const {
    const Config& c = config_;
    Scratch sc(c, b, n);
    const int64_t hidden = c.hidden;
    HiddenReporter report(b, hook, n, hidden);

    float* h = sc.h.data();
    float* xn = sc.normed.data();
    b.copy(h, rows, static_cast<size_t>(n * hidden));
    report(0, h);
    const int64_t layers = static_cast<int64_t>(weights_.layers.size());
    for (int64_t i = 0; i < layers; ++i) {
        const Layer& layer = weights_.layers[i];
        const NormedInput mixer_in(b, h, n, layer.input_norm.data(), c.norm_eps, xn);
        // Both mixers add their output to h once, at their end, as the mixture of experts does.
        b.norm_ahead(h, layer.post_norm.data());
        if (layer.kind == LayerKind::LinearAttention) {
            linear_attention_mixer(c, b, layer.linear, s, layer.state_slot, mixer_in, delta_rule_chunk, sc, h);
        } else {
            full_attention_mixer(c, b, layer.attention, s, layer.state_slot, mixer_in, at, sc, h);
        }
        b.mark(layer_kind_name(layer.kind));
        b.norm_ahead(h, i + 1 < layers ? weights_.layers[i + 1].input_norm.data() : weights_.final_norm.data());
        b.moe_swiglu(MoeInput{h, layer.post_norm.data(), c.norm_eps, xn}, n, layer.moe, c.experts_per_token,
                     c.norm_topk, h);
        b.mark("moe");
        if (i + 1 < layers) report(i + 1, h);
    }
    b.rmsnorm(h, weights_.final_norm.data(), n, hidden, c.norm_eps, normed);
    report(layers, normed);
}

std::vector<float> Model::forward(Backend& backend, SequenceState& state, std::span<const int32_t> ids,
                                  bool all_logits, const HiddenHook& hook) const {
    return forward(backend, own_state<State>(state, "qwen35_moe"), ids, all_logits, hook);
}

int32_t Model::next_greedy(Backend& backend, SequenceState& state, int32_t id) const {
    State& s = own_state<State>(state, "qwen35_moe");
    require_forward_fits(std::span<const int32_t>(&id, 1), config_.vocab, s);
    decode_step(backend, s, id);
    return s.step().read_choice(backend);
}

size_t Model::decode_state_bytes(int64_t position) const {
    const Config& c = config_;
    const size_t f32 = sizeof(float);
    size_t total = 0;
    for (LayerKind kind : c.layers) {
        if (kind == LayerKind::LinearAttention) {
            total += 2 * f32 *
                     static_cast<size_t>(c.linear_v_heads * c.linear_k_dim * c.linear_v_dim +
                                         (c.conv_kernel - 1) * c.conv_dim());
        } else {
            total += f32 * static_cast<size_t>((2 * position + 2) * c.kv_heads * c.head_dim);
        }
    }
    return total;
}

size_t Model::decode_weight_bytes() const {
    size_t total = matrix_bytes(weights_.lm_head) + matrix_bytes(weights_.embed) / static_cast<size_t>(config_.vocab);
    for (const Layer& layer : weights_.layers) {
        if (layer.kind == LayerKind::LinearAttention) {
            const LinearAttentionWeights& w = layer.linear;
            for (const MatrixView* m : {&w.qkv, &w.z, &w.b, &w.a, &w.out}) total += matrix_bytes(*m);
        } else {
            const FullAttentionWeights& w = layer.attention;
            for (const MatrixView* m : {&w.q, &w.k, &w.v, &w.o}) total += matrix_bytes(*m);
        }
        const SwigluMoeWeights& e = layer.moe;
        for (const MatrixView* m : {&e.router, &e.shared_gate, &e.shared_up, &e.shared_down, &e.shared_expert_gate}) {
            total += matrix_bytes(*m);
        }
        total += static_cast<size_t>(config_.experts_per_token) *
                 (matrix_bytes(e.gate[0]) + matrix_bytes(e.up[0]) + matrix_bytes(e.down[0]));
    }
    return total;
}

std::vector<std::pair<std::string, std::string>> Model::describe() const {
    const Config& c = config_;
    std::vector<std::pair<std::string, std::string>> lines;
    lines.emplace_back("architecture", "qwen35_moe (" + layout_.describe() + ")");
    lines.emplace_back("layers", str_cat(c.layers.size(), "  ", c.pattern(), "  (",
                                         c.count(LayerKind::LinearAttention), " Gated DeltaNet, ",
                                         c.count(LayerKind::FullAttention), " gated attention)"));
    lines.emplace_back("hidden", std::to_string(c.hidden));
    lines.emplace_back("vocab", std::to_string(c.vocab));
    if (c.linear_k_heads > 0) {
        lines.emplace_back("gated deltanet", str_cat(c.linear_k_heads, " qk heads of ", c.linear_k_dim, ", ",
                                                     c.linear_v_heads, " v heads of ", c.linear_v_dim, ", conv ",
                                                     c.conv_kernel));
    }
    if (c.attn_heads > 0) {
        lines.emplace_back("attention", str_cat(c.attn_heads, " q / ", c.kv_heads, " kv heads of ", c.head_dim,
                                                ", RoPE on ", c.rotary_dim(), " dims, theta ", c.rope_theta));
    }
    lines.emplace_back("moe", str_cat(c.experts, " experts, top-", c.experts_per_token, ", width ", c.expert_inter,
                                      ", gated shared expert ", c.shared_inter));
    lines.emplace_back("parameters", str_cat(c.parameter_count()));
    return lines;
}

}  // namespace duet::qwen35_moe
