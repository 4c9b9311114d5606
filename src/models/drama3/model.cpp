#include "models/drama3/model.h"

#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "io/safetensors.h"
#include "models/normed_input.h"

namespace duet::drama3 {

Model Model::load(const std::string& dir) {
    const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
    require(std::filesystem::exists(config_path), dir, ": no config.json (expected a model directory)");
    const Config config = load_config(config_path);
    auto checkpoint = std::make_shared<Checkpoint>(Checkpoint::open(dir));
    const Checkpoint* ck = checkpoint.get();
    return bind(config, [ck](std::string_view name) { return ck->find(name); }, dir, ck->size(), ck->total_bytes(),
                checkpoint);
}

Model Model::from_tensors(const Config& config, std::shared_ptr<const TensorSet> tensors) {
    const TensorSet* set = tensors.get();
    return bind(config, [set](std::string_view name) { return set->find(name); }, "random weights",
                set->all().size(), set->total_bytes(), tensors, set->device_storage());
}

Model Model::bind(const Config& config, const TensorLookup& lookup, const std::string& source, size_t count,
                  size_t bytes, std::shared_ptr<const void> keep_alive, DeviceTensorStorage* device) {
    qwen35_moe::Model backbone = qwen35_moe::Model::bind(config.backbone, lookup, source, count, bytes, keep_alive);
    WeightBinder binder(lookup, source);
    Weights weights = bind_weights(config, binder, backbone.weights().lm_head, device);
    weights.storage.push_back(std::move(keep_alive));
    return Model(config, std::move(backbone), std::move(weights));
}

void Model::check_frames(std::span<const int32_t> frames, std::string_view what) const {
    const int64_t width = config_.frame_width();
    require(!frames.empty() && frames.size() % static_cast<size_t>(width) == 0, what, ": expected rows of ", width,
            " values (main token and ", config_.tower.num_codebooks, " codes), got ", frames.size(), " values");
    for (size_t r = 0; r < frames.size() / width; ++r) {
        const std::span<const int32_t> row = frames.subspan(r * width, width);
        require(row[0] >= 0 && row[0] < config_.backbone.vocab, what, ": row ", r, " has main token ", row[0],
                ", expected 0..", config_.backbone.vocab - 1);
        if (!is_audio_row(row)) continue;
        require(row[1] == row[0] - config_.semantic_start, what, ": row ", r, " has semantic token ", row[0],
                " but code0 ", row[1], ", expected ", row[0] - config_.semantic_start);
        for (int64_t k = 1; k < config_.tower.num_codebooks; ++k) {
            require(row[1 + k] >= 0 && row[1 + k] < config_.tower.codebook_size, what, ": row ", r, " codebook ", k,
                    " holds code ", row[1 + k], ", expected 0..", config_.tower.codebook_size - 1);
        }
    }
}

// ASSUMED (taken from S2 Pro): an audio row's input is the token embedding plus the first Nb
// codebooks' embeddings, divided by sqrt(Nb + 1).
float Model::input_row_scale(int64_t backbone_codebooks) {
    return 1.0f / std::sqrt(static_cast<float>(backbone_codebooks + 1));
}

void Model::input_rows(Backend& b, const int32_t* frames, int64_t n, float* out) const {
    const int64_t width = config_.frame_width(), nb = config_.tower.backbone_codebooks, cb = config_.tower.codebook_size;
    std::vector<int32_t> mains(static_cast<size_t>(n)), codes(static_cast<size_t>(n * nb), -1);
    std::vector<float> scale(static_cast<size_t>(n), 1.0f);
    for (int64_t r = 0; r < n; ++r) {
        const std::span<const int32_t> row(frames + r * width, static_cast<size_t>(width));
        mains[r] = row[0];
        if (!is_audio_row(row)) continue;
        for (int64_t k = 0; k < nb; ++k) codes[r * nb + k] = static_cast<int32_t>(k * cb + row[1 + k]);
        scale[r] = input_row_scale(nb);
    }
    b.embed(backbone_.weights().embed, mains.data(), n, out);
    b.sum_embeddings(weights_.code_embeddings, codes.data(), nb, n, /*accumulate=*/true, scale.data(), out);
}

std::vector<float> Model::candidate_logits(Backend& b, const float* normed, int64_t n) const {
    const int64_t count = config_.candidates();
    Buffer logits = b.alloc(static_cast<size_t>(n * count));
    b.matmul(weights_.candidate_head, normed, n, logits.data());
    std::vector<float> host(static_cast<size_t>(n * count));
    b.download(host.data(), logits.data(), host.size());
    return host;
}

// ASSUMED: the first tower layer also reads the codebooks the backbone's row left out, for an audio
// `in` row: Σ_{Nb ≤ k < n} C_k[in.code_k]. None when the backbone row carries every codebook.
std::vector<int32_t> Model::extra_code_ids(const int32_t* in, int64_t n) const {
    const TowerConfig& t = config_.tower;
    const int64_t width = config_.frame_width(), per_row = t.num_codebooks - t.backbone_codebooks;
    std::vector<int32_t> ids(static_cast<size_t>(n * per_row), -1);
    for (int64_t r = 0; r < n; ++r) {
        const std::span<const int32_t> row(in + r * width, static_cast<size_t>(width));
        if (!is_audio_row(row)) continue;
        for (int64_t j = 0; j < per_row; ++j) {
            const int64_t k = t.backbone_codebooks + j;
            ids[r * per_row + j] = static_cast<int32_t>(k * t.codebook_size + row[1 + k]);
        }
    }
    return ids;
}

struct Model::TowerScratch {
    TowerScratch(const Config& c, Backend& b, int64_t n)
        : attention(b, attention_shape(c.tower), n),
          embedding(b.alloc(size_t(n * c.tower.dim))),
          normed(b.alloc(size_t(n * c.tower.dim))),
          x(b.alloc(size_t(n * c.tower.dim))),
          gate(b.alloc(size_t(n * c.tower.inter))),
          up(b.alloc(size_t(n * c.tower.inter))) {}

    static GatedAttentionShape attention_shape(const TowerConfig& t) {
        GatedAttentionShape s;
        s.heads = t.heads;
        s.kv_heads = t.kv_heads;
        s.head_dim = t.head_dim;
        s.rotary_dim = t.rotary_dim();
        s.theta = static_cast<float>(t.rope_theta);
        s.eps = t.norm_eps;
        s.rope = RopeStyle::Interleaved;
        s.marks = {"tower attention: norm, qkv", "tower attention: rows", "tower attention: core"};
        return s;
    }

    GatedAttentionScratch attention;
    Buffer embedding, normed, x, gate, up;
};

EmbeddingGather Model::extra_codes_gather(const int32_t* rows) const {
    const TowerConfig& t = config_.tower;
    EmbeddingGather g;
    g.ids = rows + 1 + t.backbone_codebooks;
    g.per_row = t.num_codebooks - t.backbone_codebooks;
    g.first_row = t.backbone_codebooks * t.codebook_size;
    g.row_step = t.codebook_size;
    g.accumulate = true;
    return g;
}

void Model::tower_layer(Backend& b, State& s, int64_t t, float* hin,
                        const std::function<void(NormedProduct&)>& embed, int64_t n, const StepPosition& at,
                        TowerScratch& sc, bool hidden_ready_early, const ProductOut* head) const {
    const TowerConfig& c = config_.tower;
    const TowerLayer& w = weights_.tower[t];
    const int64_t dim = c.dim;
    float* e = sc.embedding.data();
    NormedProduct embedding{w.eh_embedding, e, w.enorm.data()};
    embedding.row_scratch = e;
    embed(embedding);
    b.mark("tower input: embedding", Backend::MarkLevel::Op);
    // x = eh_proj [enorm(e) ; hnorm(hin)], as two half-width products with their norms folded in.
    float* x = sc.x.data();
    b.norm_ahead(x, w.input_norm.data());
    NormedProduct hidden{w.eh_hidden, hin, w.hnorm.data()};
    hidden.ready_early = hidden_ready_early;
    b.matmul_normed_pair(embedding, hidden, n, c.norm_eps, x, false);
    b.mark("tower input");

    const NormedInput attention_in(b, x, n, w.input_norm.data(), c.norm_eps, sc.normed.data());
    b.norm_ahead(x, w.post_norm.data());  // the attention's output projection adds to x once, at its end
    gated_attention(b, TowerScratch::attention_shape(c), w.attention, attention_in, at, s.tower_keys(t),
                    s.tower_values(t), sc.attention, x);
    b.mark("tower attention");
    const NormedInput mlp_in(b, x, n, w.post_norm.data(), c.norm_eps, sc.normed.data());
    mlp_in.swiglu(w.gate, w.up, sc.gate.data(), sc.up.data());
    b.mark("tower mlp: norm, gate, up, silu", Backend::MarkLevel::Op);
    b.norm_ahead(x, w.out_norm.data());
    b.matmul_fused(w.down, sc.gate.data(), n, x, FusedProduct{nullptr, 0.0f, true});
    b.mark("tower mlp: down", Backend::MarkLevel::Op);
    if (head != nullptr) {
        b.matmul_normed_keeping(*head, x, w.out_norm.data(), c.norm_eps, n, hin);
        b.mark("tower mlp: out norm and head product");
        return;
    }
    b.rmsnorm(x, w.out_norm.data(), n, dim, c.norm_eps, hin);
    b.mark("tower mlp");
}

void Model::tower_teacher_forced(Backend& b, State& s, const float* hidden, const int32_t* in, const int32_t* next,
                                 int64_t n, int64_t pos, float* head_logits) const {
    if (n == 0) return;
    const TowerConfig& c = config_.tower;
    const int64_t width = config_.frame_width(), dim = c.dim, codes = c.num_codebooks - 1;
    require(pos >= 0 && pos + n <= s.capacity(), "drama3 tower: rows ", pos, "..", pos + n - 1,
            " do not fit the state's capacity of ", s.capacity());
    TowerScratch sc(config_, b, n);
    Buffer hin = b.alloc(static_cast<size_t>(n * dim));
    b.copy(hin.data(), hidden, static_cast<size_t>(n * dim));
    Buffer logits = b.alloc(head_logits != nullptr ? static_cast<size_t>(n * c.codebook_size) : 0);
    std::vector<float> host_logits(static_cast<size_t>(n * c.codebook_size));
    const std::vector<int32_t> extra = extra_code_ids(in, n);
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int64_t t = 0; t < c.layers(); ++t) {
        const int64_t column = c.input_column(t);
        for (int64_t r = 0; r < n; ++r) {
            const std::span<const int32_t> following(next + r * width, static_cast<size_t>(width));
            tokens[r] = is_audio_row(following) ? following[column] : -1;  // the seed's mask
        }
        const auto embed = [&](NormedProduct& in) {
            float* e = in.row_scratch;
            b.sum_embeddings(weights_.tower[t].embed, tokens.data(), 1, n, /*accumulate=*/false, nullptr, e);
            if (t == 0 && c.num_codebooks > c.backbone_codebooks) {
                b.sum_embeddings(weights_.code_embeddings, extra.data(), c.num_codebooks - c.backbone_codebooks, n,
                                 true, nullptr, e);
            }
        };
        tower_layer(b, s, t, hin.data(), embed, n, StepPosition{pos, nullptr, s.capacity()}, sc);
        if (head_logits == nullptr || t < c.shared_layers) continue;
        b.matmul(weights_.tower[t].head, hin.data(), n, logits.data());
        b.download(host_logits.data(), logits.data(), host_logits.size());
        const int64_t k = t - c.shared_layers;
        for (int64_t r = 0; r < n; ++r) {
            std::copy_n(host_logits.data() + r * c.codebook_size, c.codebook_size,
                        head_logits + (r * codes + k) * c.codebook_size);
        }
    }
}

void Model::frame_candidates(Backend& b, const float* normed, float* logits) const {
    b.matmul(weights_.candidate_head, normed, 1, logits);
}

void Model::tower_step(Backend& b, State& s, const float* hidden, const int32_t* previous, int32_t* frame,
                       const StepPosition& at, const SamplingParams& params, const DrawCounter& draws,
                       float* head_logits) const {
    const TowerConfig& c = config_.tower;
    TowerScratch sc(config_, b, 1);
    Buffer hin = b.alloc(static_cast<size_t>(c.dim));
    b.copy(hin.data(), hidden, static_cast<size_t>(c.dim));
    for (int64_t t = 0; t < c.layers(); ++t) {
        // The layer's token row is read by the tower input's product itself, except where layer 0
        // adds the extra codes' rows to it.
        const auto embed = [&](NormedProduct& in) {
            if (t == 0 && c.num_codebooks > c.backbone_codebooks) {
                EmbeddingGather token;
                token.ids = frame + c.input_column(t);
                b.gather_embeddings(weights_.tower[t].embed, token, 1, in.row_scratch);
                b.gather_embeddings(weights_.code_embeddings, extra_codes_gather(previous), 1, in.row_scratch);
                return;
            }
            in.table = &weights_.tower[t].embed;
            in.row_id = frame + c.input_column(t);
            // Code 0 comes with the main token, in the frame's head; a later code is drawn by the
            // layer just before.
            in.ready_early = c.input_column(t) == 1;
        };
        // A layer after a headed one finds hin written before that layer's head product and draw.
        const bool hidden_ready_early = t > c.shared_layers;
        if (t < c.shared_layers) {
            tower_layer(b, s, t, hin.data(), embed, 1, at, sc, hidden_ready_early);
            continue;
        }
        const int64_t k = 1 + (t - c.shared_layers);
        float* logits = head_logits + (k - 1) * c.codebook_size;
        const ProductOut head{weights_.tower[t].head, logits};
        tower_layer(b, s, t, hin.data(), embed, 1, at, sc, hidden_ready_early, &head);
        DrawCounter code_draw = draws;
        code_draw.slot = draws.slot + static_cast<uint32_t>(k);
        b.sample(logits, 1, c.codebook_size, params, code_draw, frame + 1 + k);
        b.mark("tower head");
    }
}

void Model::audio_input_row(Backend& b, const int32_t* frame, float* out) const {
    const int64_t nb = config_.tower.backbone_codebooks;
    EmbeddingGather main;
    main.ids = frame;
    b.gather_embeddings(backbone_.weights().embed, main, 1, out);
    EmbeddingGather codes;
    codes.ids = frame + 1;
    codes.per_row = nb;
    codes.row_step = config_.tower.codebook_size;
    codes.accumulate = true;
    codes.scale = input_row_scale(nb);
    b.gather_embeddings(weights_.code_embeddings, codes, 1, out);
}

size_t Model::frame_state_bytes(int64_t position) const {
    const TowerConfig& t = config_.tower;
    const size_t tower_row = sizeof(float) * static_cast<size_t>(t.kv_heads * t.head_dim);
    return backbone_.decode_state_bytes(position) +
           static_cast<size_t>(t.layers()) * tower_row * static_cast<size_t>(2 * position + 2);
}

size_t Model::frame_weight_bytes() const {
    size_t total = backbone_.decode_weight_bytes() - matrix_bytes(backbone_.weights().lm_head) +
                   matrix_bytes(weights_.candidate_head);
    for (const TowerLayer& l : weights_.tower) {
        for (const MatrixView* m : {&l.eh_embedding, &l.eh_hidden, &l.attention.q, &l.attention.k, &l.attention.v,
                                    &l.attention.o, &l.gate, &l.up, &l.down}) {
            total += matrix_bytes(*m);
        }
        if (l.head.data != nullptr) total += matrix_bytes(l.head);
        total += matrix_bytes(l.embed) / static_cast<size_t>(l.embed.rows);
    }
    return total;
}

std::vector<std::pair<std::string, std::string>> Model::describe() const {
    std::vector<std::pair<std::string, std::string>> lines = backbone_.describe();
    lines[0].second = "drama3 (backbone " + lines[0].second + ")";
    const TowerConfig& t = config_.tower;
    lines.emplace_back("semantic tokens", str_cat(config_.semantic_start, "..", config_.semantic_end, ", eos ",
                                                  config_.eos));
    lines.emplace_back("codebook tower", str_cat(t.layers(), " layers (", t.shared_layers, " shared), ", t.heads,
                                                 " q / ", t.kv_heads, " kv heads of ", t.head_dim, ", RoPE on ",
                                                 t.rotary_dim(), " dims, SwiGLU ", t.inter));
    lines.emplace_back("codebooks", str_cat(t.num_codebooks, " of ", t.codebook_size, " codes, ",
                                            t.backbone_codebooks, " summed into the backbone row"));
    for (auto& [name, value] : lines) {
        if (name == "parameters") value = str_cat(config_.parameter_count(), " (backbone ", config_.backbone.parameter_count(), ")");
    }
    return lines;
}

}  // namespace duet::drama3
