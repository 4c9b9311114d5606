#include "models/drama3/weights.h"

#include <cstring>

#include "base/dtype.h"

namespace duet::drama3 {

namespace {

// Rows [first, first + count) and row `extra` of `m`, copied into new storage of the same dtype.
MatrixView copy_rows(const MatrixView& m, int64_t first, int64_t count, int64_t extra,
                     std::vector<std::shared_ptr<const void>>& storage) {
    const size_t row_bytes = static_cast<size_t>(m.cols) * dtype_size(m.dtype);
    auto bytes = std::make_shared<std::vector<uint8_t>>(row_bytes * static_cast<size_t>(count + 1));
    const auto* src = static_cast<const uint8_t*>(m.data);
    std::memcpy(bytes->data(), src + static_cast<size_t>(first) * row_bytes, static_cast<size_t>(count) * row_bytes);
    std::memcpy(bytes->data() + static_cast<size_t>(count) * row_bytes, src + static_cast<size_t>(extra) * row_bytes,
                row_bytes);
    storage.push_back(bytes);
    return {m.dtype, count + 1, m.cols, bytes->data()};
}

// Columns [first, first + count) of `m` as a matrix of their own.
MatrixView copy_columns(const MatrixView& m, int64_t first, int64_t count,
                        std::vector<std::shared_ptr<const void>>& storage) {
    const size_t element = dtype_size(m.dtype);
    auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(m.rows * count) * element);
    const auto* src = static_cast<const uint8_t*>(m.data);
    for (int64_t r = 0; r < m.rows; ++r) {
        std::memcpy(bytes->data() + static_cast<size_t>(r * count) * element,
                    src + static_cast<size_t>(r * m.cols + first) * element, static_cast<size_t>(count) * element);
    }
    storage.push_back(bytes);
    return {m.dtype, m.rows, count, bytes->data()};
}

}  // namespace

std::string tower_layer_prefix(const TowerConfig& tower, int64_t t) {
    return t < tower.shared_layers ? str_cat("audio_decoder_mtp_shared.layers.", t, ".")
                                   : str_cat("audio_decoder_mtp.layers.", t - tower.shared_layers, ".");
}

Weights bind_weights(const Config& c, WeightBinder& b, const MatrixView& lm_head) {
    const TowerConfig& t = c.tower;
    Weights w;
    w.code_embeddings =
        b.matrix({"audio_decoder.codebook_embeddings.weight"}, t.num_codebooks * t.codebook_size, t.dim);
    std::vector<MatrixView> eh_proj;
    for (int64_t i = 0; i < t.layers(); ++i) {
        const std::string p = tower_layer_prefix(t, i);
        TowerLayer& layer = w.tower.emplace_back();
        layer.embed = b.matrix({p + "embed_tokens.weight"}, t.codebook_size, t.dim);
        layer.enorm = b.vector({p + "enorm.weight"}, {t.dim});
        layer.hnorm = b.vector({p + "hnorm.weight"}, {t.dim});
        layer.input_norm = b.vector({p + "input_layernorm.weight"}, {t.dim});
        layer.post_norm = b.vector({p + "post_attention_layernorm.weight"}, {t.dim});
        layer.out_norm = b.vector({p + "norm.weight"}, {t.dim});
        eh_proj.push_back(b.matrix({p + "eh_proj.weight"}, t.dim, 2 * t.dim));
        const std::string a = p + "self_attn.";
        layer.attention.q = b.matrix({a + "q_proj.weight"}, 2 * t.heads * t.head_dim, t.dim);
        layer.attention.k = b.matrix({a + "k_proj.weight"}, t.kv_heads * t.head_dim, t.dim);
        layer.attention.v = b.matrix({a + "v_proj.weight"}, t.kv_heads * t.head_dim, t.dim);
        layer.attention.o = b.matrix({a + "o_proj.weight"}, t.dim, t.heads * t.head_dim);
        layer.attention.q_norm = b.vector({a + "q_norm.weight"}, {t.head_dim});
        layer.attention.k_norm = b.vector({a + "k_norm.weight"}, {t.head_dim});
        layer.gate = b.matrix({p + "mlp.gate_proj.weight"}, t.inter, t.dim);
        layer.up = b.matrix({p + "mlp.up_proj.weight"}, t.inter, t.dim);
        layer.down = b.matrix({p + "mlp.down_proj.weight"}, t.dim, t.inter);
        if (i >= t.shared_layers) layer.head = b.matrix({p + "head.weight"}, t.codebook_size, t.dim);
    }
    b.finish();
    w.storage = b.take_storage();
    for (size_t i = 0; i < eh_proj.size(); ++i) {
        w.tower[i].eh_embedding = copy_columns(eh_proj[i], 0, t.dim, w.storage);
        w.tower[i].eh_hidden = copy_columns(eh_proj[i], t.dim, t.dim, w.storage);
    }
    w.candidate_head = copy_rows(lm_head, c.semantic_start, c.semantic_count(), c.eos, w.storage);
    return w;
}

}  // namespace duet::drama3
