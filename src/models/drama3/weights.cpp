#include "models/drama3/weights.h"

#include <cstring>

#include "base/dtype.h"

namespace duet::drama3 {

namespace {

// Copies of pieces of weights, made where the weights are: in host memory, or in the device's when
// they are in a device storage's memory.
class Copier {
public:
    Copier(DeviceTensorStorage* device, std::vector<std::shared_ptr<const void>>& storage)
        : device_(device), storage_(storage) {}

    // `bytes` of new storage in the same memory as `like`, kept alive by the weights.
    uint8_t* allocate_like(const void* like, size_t bytes) {
        if (on_device(like)) {
            std::shared_ptr<void> block = device_->allocate(bytes);
            storage_.push_back(block);
            return static_cast<uint8_t*>(block.get());
        }
        auto block = std::make_shared<std::vector<uint8_t>>(bytes);
        storage_.push_back(block);
        return block->data();
    }
    // `rows` pieces of `row_bytes` from rows `src_pitch` bytes apart to rows `dst_pitch` bytes apart.
    void copy(uint8_t* dst, size_t dst_pitch, const uint8_t* src, size_t src_pitch, size_t row_bytes, size_t rows) {
        if (on_device(src)) {
            device_->copy_rows(dst, dst_pitch, src, src_pitch, row_bytes, rows);
            return;
        }
        for (size_t r = 0; r < rows; ++r) std::memcpy(dst + r * dst_pitch, src + r * src_pitch, row_bytes);
    }

private:
    bool on_device(const void* p) const { return device_ != nullptr && device_->holds(p); }

    DeviceTensorStorage* device_;
    std::vector<std::shared_ptr<const void>>& storage_;
};

// Rows [first, first + count) and row `extra` of `m`, copied into new storage of the same dtype.
MatrixView copy_rows(const MatrixView& m, int64_t first, int64_t count, int64_t extra, Copier& copier) {
    const size_t row_bytes = static_cast<size_t>(m.cols) * dtype_size(m.dtype);
    const size_t block = static_cast<size_t>(count) * row_bytes;
    uint8_t* bytes = copier.allocate_like(m.data, block + row_bytes);
    const auto* src = static_cast<const uint8_t*>(m.data);
    copier.copy(bytes, block, src + static_cast<size_t>(first) * row_bytes, block, block, 1);
    copier.copy(bytes + block, row_bytes, src + static_cast<size_t>(extra) * row_bytes, row_bytes, row_bytes, 1);
    return {m.dtype, count + 1, m.cols, bytes};
}

// Columns [first, first + count) of `m` as a matrix of their own.
MatrixView copy_columns(const MatrixView& m, int64_t first, int64_t count, Copier& copier) {
    const size_t element = dtype_size(m.dtype);
    const size_t row_bytes = static_cast<size_t>(count) * element;
    uint8_t* bytes = copier.allocate_like(m.data, static_cast<size_t>(m.rows) * row_bytes);
    const auto* src = static_cast<const uint8_t*>(m.data) + static_cast<size_t>(first) * element;
    copier.copy(bytes, row_bytes, src, static_cast<size_t>(m.cols) * element, row_bytes, static_cast<size_t>(m.rows));
    return {m.dtype, m.rows, count, bytes};
}

}  // namespace

std::string tower_layer_prefix(const TowerConfig& tower, int64_t t) {
    return t < tower.shared_layers ? str_cat("audio_decoder_mtp_shared.layers.", t, ".")
                                   : str_cat("audio_decoder_mtp.layers.", t - tower.shared_layers, ".");
}

Weights bind_weights(const Config& c, WeightBinder& b, const MatrixView& lm_head, DeviceTensorStorage* device) {
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
    Copier copier(device, w.storage);
    for (size_t i = 0; i < eh_proj.size(); ++i) {
        w.tower[i].eh_embedding = copy_columns(eh_proj[i], 0, t.dim, copier);
        w.tower[i].eh_hidden = copy_columns(eh_proj[i], t.dim, t.dim, copier);
    }
    w.candidate_head = copy_rows(lm_head, c.semantic_start, c.semantic_count(), c.eos, copier);
    return w;
}

}  // namespace duet::drama3
