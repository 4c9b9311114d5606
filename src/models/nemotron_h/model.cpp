#include "models/nemotron_h/model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "io/safetensors.h"
#include "models/forward_support.h"
#include "models/normed_input.h"

namespace duet::nemotron_h {

Model Model::load(const std::string& dir) {
    const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
    require(std::filesystem::exists(config_path), dir, ": no config.json (expected a model directory)");
    Config config = load_config(config_path);
    auto checkpoint = std::make_shared<Checkpoint>(Checkpoint::open(dir));
    const Checkpoint* ck = checkpoint.get();
    return bind(config, [ck](std::string_view name) { return ck->find(name); }, ck->all(), dir, ck->total_bytes(),
                checkpoint);
}

Model Model::from_tensors(const Config& config, std::shared_ptr<const TensorSet> tensors) {
    const TensorSet* set = tensors.get();
    return bind(config, [set](std::string_view name) { return set->find(name); }, set->all(), "random weights",
                set->total_bytes(), tensors);
}

Model Model::bind(const Config& config, const TensorLookup& lookup, const std::vector<const TensorEntry*>& all,
                  const std::string& source, size_t tensor_bytes, std::shared_ptr<const void> keep_alive) {
    // Under a prefix every name is read through it, so the layouts below need not know of it.
    const std::string prefix = checkpoint_prefix(lookup);
    const TensorLookup scoped = prefix.empty() ? lookup : TensorLookup([lookup, prefix](std::string_view name) {
        return lookup(prefix + std::string(name));
    });
    WeightBinder binder(scoped, source);
    Layout layout = detect_layout(binder, source);
    const std::string draft_prefix = prefix + std::string(kDraftPrefix);
    const bool with_draft = std::any_of(all.begin(), all.end(), [&](const TensorEntry* t) {
        return std::string_view(t->name).starts_with(draft_prefix);
    });
    Weights weights = bind_weights(config, binder, layout, with_draft);
    weights.storage.push_back(std::move(keep_alive));
    const std::string layout_name = prefix.empty() ? layout.name : layout.name + " under " + prefix;
    return Model(config, std::move(weights), layout_name, all.size(), tensor_bytes);
}

namespace {

}  // namespace

// Scratch activations for one forward call of n tokens.
struct Model::Scratch {
    Scratch(const Config& c, Backend& b, int64_t n) {
        auto make = [&](int64_t width) { return b.alloc(static_cast<size_t>(n * std::max<int64_t>(width, 1))); };
        h = make(c.hidden);
        normed = make(c.hidden);
        mixed = make(c.hidden);
        projected = make(std::max(c.in_proj_rows(), c.attn_heads * c.head_dim));
        conv_out = make(c.conv_dim());
        inner = make(std::max({c.mamba_inner(), c.attn_heads * c.head_dim, c.mlp_inter}));
        new_keys = make(c.kv_heads * c.head_dim);
        new_values = make(c.kv_heads * c.head_dim);
    }
    Buffer h, normed, mixed, projected, conv_out, inner, new_keys, new_values;
};

namespace {

using Scratch = Model::Scratch;

// The products that add to the residual stream `h`.
constexpr FusedProduct kAddToStream{nullptr, 0.0f, true};

// h += mamba(rmsnorm(h)).
void mamba_mixer(const Config& c, Backend& b, const MambaWeights& w, const std::vector<float>& norm, State& s,
                 int64_t slot, float* h, int64_t n, Scratch& sc) {
    const int64_t rows = c.in_proj_rows(), inner = c.mamba_inner(), conv_dim = c.conv_dim();
    float* zxbcdt = sc.projected.data();
    NormedInput(b, h, n, norm.data(), c.norm_eps, sc.normed.data()).product(w.in_proj, zxbcdt);
    b.mark("mamba: norm, in_proj", Backend::MarkLevel::Op);
    const bool record = s.history_capacity() >= n;
    MambaMiddleArgs m;
    m.conv.x = zxbcdt + inner;
    m.conv.x_stride = rows;
    m.conv.channels = conv_dim;
    m.conv.kernel = c.conv_kernel;
    m.conv.taps = w.conv_taps.data();
    m.conv.bias = w.conv_bias.data();
    m.conv.ring = s.conv_ring(slot);
    m.conv.out = sc.conv_out.data();
    m.conv.ring_history = record ? s.conv_history(slot) : nullptr;
    SsmScanArgs& scan = m.scan;
    scan.n = n;
    scan.heads = c.mamba_heads;
    scan.head_dim = c.mamba_head_dim;
    scan.groups = c.mamba_groups;
    scan.state_size = c.ssm_state;
    scan.x = sc.conv_out.data();
    scan.x_stride = conv_dim;
    scan.dt = zxbcdt + inner + conv_dim;
    scan.dt_stride = rows;
    scan.dt_bias = w.dt_bias.data();
    scan.a = w.a.data();
    scan.d = w.d.data();
    scan.dt_min = c.dt_min;
    scan.dt_max = c.dt_max;
    scan.state = s.ssm_state(slot);
    scan.y = sc.inner.data();
    scan.state_history = record ? s.ssm_history(slot) : nullptr;
    m.z = zxbcdt;
    m.z_stride = rows;
    m.norm_weight = w.norm.data();
    m.norm_groups = c.mamba_groups;
    m.eps = c.norm_eps;
    b.mamba_conv_scan_norm(m);
    b.mark("mamba: conv, scan, gated norm", Backend::MarkLevel::Op);
    b.matmul_fused(w.out_proj, sc.inner.data(), n, h, kAddToStream);
}

// h += attention(xn) over a cache whose first `at.pos` rows are filled.
void attention_mixer(const Config& c, Backend& b, const AttentionWeights& w, float* keys, float* values,
                     const StepPosition& at, const NormedInput& xn, Scratch& sc, float* h) {
    const int64_t n = xn.tokens(), kv_width = c.kv_heads * c.head_dim;
    xn.products({{w.q, sc.projected.data()}, {w.k, sc.new_keys.data()}, {w.v, sc.new_values.data()}});
    b.mark("attention: norm, qkv", Backend::MarkLevel::Op);
    b.store_key_value_rows(keys, values, kv_width, at.pos, at.at, sc.new_keys.data(), sc.new_values.data(), n);
    b.mark("attention: cache rows", Backend::MarkLevel::Op);
    AttentionArgs a;
    a.n = n;
    a.pos = at.pos;
    a.position = at.at;
    a.capacity = at.capacity;
    a.heads = c.attn_heads;
    a.kv_heads = c.kv_heads;
    a.head_dim = c.head_dim;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    a.q = sc.projected.data();
    a.k_cache = keys;
    a.v_cache = values;
    a.out = sc.inner.data();
    b.attention(a);
    b.mark("attention: core", Backend::MarkLevel::Op);
    b.matmul_fused(w.o, sc.inner.data(), n, h, kAddToStream);
}

// h += mlp(rmsnorm(h)), the norm folded into the up projection.
void mlp_mixer(const Config& c, Backend& b, const MlpWeights& w, const std::vector<float>& norm, float* h, int64_t n,
               Scratch& sc) {
    b.matmul_fused(w.up, h, n, sc.inner.data(), FusedProduct{norm.data(), c.norm_eps, false});
    b.relu2(sc.inner.data(), n * c.mlp_inter);
    b.matmul_fused(w.down, sc.inner.data(), n, h, kAddToStream);
}

MoeRouting routing_of(const Config& c) {
    MoeRouting r;
    r.top_k = c.experts_per_token;
    r.groups = c.expert_groups;
    r.groups_kept = c.expert_groups_kept;
    r.normalize = c.norm_topk;
    r.scale = c.routed_scale;
    return r;
}

}  // namespace

void Model::apply_patches(Backend& b, float* h, int64_t n, std::span<const EmbeddingPatch> patches) const {
    for (const EmbeddingPatch& p : patches) {
        require(p.first >= 0 && p.count >= 0 && p.first + p.count <= n && (p.count == 0 || p.rows != nullptr),
                "nemotron_h: embedding rows for inputs ", p.first, "..", p.first + p.count - 1, " of ", n,
                " do not fit the inputs");
        b.upload(h + p.first * config_.hidden, p.rows, static_cast<size_t>(p.count * config_.hidden));
    }
}

void Model::run_layers(Backend& b, State& s, const StepPosition& at, int64_t n, Scratch& sc,
                       const std::function<void(int64_t, const float*)>& report) const {
    const Config& c = config_;
    const int64_t hidden = c.hidden;
    float* h = sc.h.data();
    const int64_t layers = static_cast<int64_t>(weights_.layers.size());
    for (int64_t i = 0; i < layers; ++i) {
        const Layer& layer = weights_.layers[i];
        float* xn = sc.normed.data();
        // Every mixer adds to h once, at its end; the next layer (or the final norm) reads it normalised.
        b.norm_ahead(h, i + 1 < layers ? weights_.layers[i + 1].norm.data() : weights_.final_norm.data());
        switch (layer.kind) {
            case LayerKind::Mamba: mamba_mixer(c, b, layer.mamba, layer.norm, s, layer.state_slot, h, n, sc); break;
            case LayerKind::Attention:
                attention_mixer(c, b, layer.attention, s.keys(layer.state_slot), s.values(layer.state_slot), at,
                                NormedInput(b, h, n, layer.norm.data(), c.norm_eps, xn), sc, h);
                break;
            case LayerKind::MoE:
                b.moe_relu2(MoeInput{h, layer.norm.data(), c.norm_eps, xn}, n, layer.moe.experts, routing_of(c), h);
                break;
            case LayerKind::MLP: mlp_mixer(c, b, layer.mlp, layer.norm, h, n, sc); break;
        }
        b.mark(layer_kind_name(layer.kind));
        if (report && i + 1 < layers) report(i + 1, h);
    }
    b.rmsnorm(h, weights_.final_norm.data(), n, hidden, c.norm_eps, sc.normed.data());
    if (report) report(layers, sc.normed.data());
}

void Model::decode_step(Backend& b, State& s, int32_t id) const {
    StepSlots& slots = s.step();
    slots.set(b, id, s.position());
    const StepPosition at{s.position(), slots.position(), s.capacity()};
    b.run_step(slots.key(), [&] {
        Scratch sc(config_, b, 1);
        EmbeddingGather g;
        g.ids = slots.id();
        b.gather_embeddings(weights_.embed, g, 1, sc.h.data());
        run_layers(b, s, at, 1, sc, {});
        b.matmul(weights_.lm_head, sc.normed.data(), 1, slots.output());
        slots.choose_greedy(b, config_.vocab);
        return static_cast<const float*>(slots.output());
    });
    s.advance(1);
}

std::vector<float> Model::forward(Backend& b, State& s, std::span<const int32_t> ids, bool all_logits,
                                  const HiddenHook& hook, std::vector<float>* final_hidden,
                                  std::span<const EmbeddingPatch> patches) const {
    const Config& c = config_;
    require_forward_fits(ids, c.vocab, s);
    const int64_t n = static_cast<int64_t>(ids.size());
    if (n == 1 && !hook && final_hidden == nullptr && patches.empty()) {
        decode_step(b, s, ids[0]);
        return s.step().read_output(b, c.vocab);
    }
    Scratch sc(c, b, n);
    const int64_t hidden = c.hidden;
    HiddenReporter report(b, hook, n, hidden);

    float* h = sc.h.data();
    b.embed(weights_.embed, ids.data(), n, h);
    apply_patches(b, h, n, patches);
    report(0, h);
    run_layers(b, s, StepPosition{s.position(), nullptr, s.capacity()}, n, sc,
               hook ? std::function<void(int64_t, const float*)>(std::ref(report)) : nullptr);
    s.advance(n);

    float* final_normed = sc.normed.data();
    if (final_hidden != nullptr) {
        final_hidden->resize(static_cast<size_t>(n * hidden));
        b.download(final_hidden->data(), final_normed, final_hidden->size());
    }

    return lm_head_logits(b, weights_.lm_head, final_normed, n, all_logits ? n : 1);
}

size_t Model::decode_state_bytes(int64_t position) const {
    const Config& c = config_;
    const size_t f32 = sizeof(float);
    size_t total = 0;
    for (LayerKind kind : c.layers) {
        if (kind == LayerKind::Mamba) {
            total += 2 * f32 * static_cast<size_t>(c.mamba_inner() * c.ssm_state + (c.conv_kernel - 1) * c.conv_dim());
        } else if (kind == LayerKind::Attention) {
            total += f32 * static_cast<size_t>((2 * position + 2) * c.kv_heads * c.head_dim);
        }
    }
    return total;
}

size_t Model::decode_weight_bytes() const {
    size_t total = matrix_bytes(weights_.lm_head) + matrix_bytes(weights_.embed) / static_cast<size_t>(config_.vocab);
    for (const Layer& layer : weights_.layers) {
        switch (layer.kind) {
            case LayerKind::Mamba:
                total += matrix_bytes(layer.mamba.in_proj) + matrix_bytes(layer.mamba.out_proj);
                break;
            case LayerKind::Attention:
                for (const MatrixView* m : {&layer.attention.q, &layer.attention.k, &layer.attention.v, &layer.attention.o}) {
                    total += matrix_bytes(*m);
                }
                break;
            case LayerKind::MoE: {
                const MoeWeights& e = layer.moe.experts;
                total += matrix_bytes(e.router) + matrix_bytes(e.shared_up) + matrix_bytes(e.shared_down);
                total += static_cast<size_t>(config_.experts_per_token) *
                         (matrix_bytes(e.up[0]) + matrix_bytes(e.down[0]));
                break;
            }
            case LayerKind::MLP: total += matrix_bytes(layer.mlp.up) + matrix_bytes(layer.mlp.down); break;
        }
    }
    return total;
}

}  // namespace duet::nemotron_h

namespace duet::nemotron_h {

std::vector<float> Model::forward(Backend& backend, SequenceState& state, std::span<const int32_t> ids,
                                  bool all_logits, const HiddenHook& hook) const {
    return forward(backend, own_state<State>(state, "nemotron_h"), ids, all_logits, hook);
}

int32_t Model::next_greedy(Backend& backend, SequenceState& state, int32_t id) const {
    State& s = own_state<State>(state, "nemotron_h");
    require_forward_fits(std::span<const int32_t>(&id, 1), config_.vocab, s);
    decode_step(backend, s, id);
    return s.step().read_choice(backend);
}

std::vector<std::pair<std::string, std::string>> Model::describe() const {
    const Config& c = config_;
    std::vector<std::pair<std::string, std::string>> lines;
    lines.emplace_back("architecture", "nemotron_h (" + layout_ + " layout)");
    lines.emplace_back("layers", str_cat(c.layers.size(), "  ", c.pattern(), "  (", c.count(LayerKind::Mamba),
                                         " Mamba-2, ", c.count(LayerKind::Attention), " attention, ",
                                         c.count(LayerKind::MoE), " MoE, ", c.count(LayerKind::MLP), " MLP)"));
    lines.emplace_back("hidden", std::to_string(c.hidden));
    lines.emplace_back("vocab", std::to_string(c.vocab));
    if (c.mamba_heads > 0) {
        lines.emplace_back("mamba-2", str_cat(c.mamba_heads, " heads x ", c.mamba_head_dim, ", ", c.mamba_groups,
                                              " groups, state ", c.ssm_state, ", conv ", c.conv_kernel));
    }
    if (c.attn_heads > 0) {
        lines.emplace_back("attention", str_cat(c.attn_heads, " q / ", c.kv_heads, " kv heads of ", c.head_dim,
                                                ", no positional encoding"));
    }
    if (c.experts > 0) {
        lines.emplace_back("moe", str_cat(c.experts, " experts, top-", c.experts_per_token, ", width ",
                                          c.expert_inter, ", shared ", c.shared_inter, ", scale ", c.routed_scale));
    }
    lines.emplace_back("parameters", str_cat(c.parameter_count()));
    return lines;
}

}  // namespace duet::nemotron_h

namespace duet::nemotron_h {

std::vector<float> Model::draft_forward(Backend& b, State& s, std::span<const float> hidden,
                                        std::span<const int32_t> next_ids, bool all_logits,
                                        std::span<const EmbeddingPatch> patches) const {
    require(weights_.draft.has_value(), "this checkpoint has no draft (mtp.*) module");
    require(s.has_draft(), "the sequence state has no draft cache");
    const DraftWeights& d = *weights_.draft;
    const Config& c = config_;
    const int64_t n = static_cast<int64_t>(next_ids.size());
    const int64_t h = c.hidden;
    require(n > 0 && hidden.size() == static_cast<size_t>(n * h), "draft: ", n, " ids need ", n * h,
            " hidden values, got ", hidden.size());
    for (int32_t id : next_ids) {
        require(id >= 0 && id < c.vocab, "draft: token id ", id, " is outside the vocabulary [0, ", c.vocab, ")");
    }
    require(s.draft_position() + n <= s.capacity(), "draft: ", n, " positions do not fit the state (capacity ",
            s.capacity(), ", ", s.draft_position(), " used)");

    Scratch sc(c, b, n);
    // The fused input: each row is [embed_norm(embed(next)) | hidden_norm(h)].
    Buffer hidden_rows = b.alloc(static_cast<size_t>(n * h));
    b.upload(hidden_rows.data(), hidden.data(), hidden.size());
    b.embed(weights_.embed, next_ids.data(), n, sc.h.data());
    apply_patches(b, sc.h.data(), n, patches);
    b.rmsnorm(sc.h.data(), d.embed_norm.data(), n, h, c.norm_eps, sc.normed.data());
    b.rmsnorm(hidden_rows.data(), d.hidden_norm.data(), n, h, c.norm_eps, sc.mixed.data());
    Buffer fused = b.alloc(static_cast<size_t>(n * 2 * h));
    for (int64_t t = 0; t < n; ++t) {
        b.copy(fused.data() + t * 2 * h, sc.normed.data() + t * h, static_cast<size_t>(h));
        b.copy(fused.data() + t * 2 * h + h, sc.mixed.data() + t * h, static_cast<size_t>(h));
    }
    float* x = sc.h.data();
    b.matmul(d.fuse, fused.data(), n, x);

    attention_mixer(c, b, d.attention, s.draft_keys(), s.draft_values(),
                    StepPosition{s.draft_position(), nullptr, s.capacity()},
                    NormedInput(b, x, n, d.attention_norm.data(), c.norm_eps, sc.normed.data()), sc, x);
    b.moe_relu2(MoeInput{x, d.moe_norm.data(), c.norm_eps, sc.normed.data()}, n, d.moe.experts, routing_of(c), x);
    s.advance_draft(n);

    const int64_t rows = all_logits ? n : 1;
    b.rmsnorm(x + (n - rows) * h, d.output_norm.data(), rows, h, c.norm_eps, sc.normed.data());
    return lm_head_logits(b, weights_.lm_head, sc.normed.data(), rows, rows);
}

}  // namespace duet::nemotron_h
