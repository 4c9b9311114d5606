// Drama 3's weights beyond the backbone: the code embeddings, the codebook tower and the candidate
// head (the LM head's semantic rows and EOS, copied at load so a step reads only those).
#pragma once

#include <memory>
#include <vector>

#include "models/drama3/config.h"
#include "models/device_tensor_storage.h"
#include "models/gated_attention.h"
#include "models/weight_binder.h"

namespace duet::drama3 {

struct TowerLayer {
    MatrixView embed;  // embed_tokens [codebook_size, dim]
    std::vector<float> enorm, hnorm, input_norm, post_norm, out_norm;
    // eh_proj [dim, 2·dim] split into the halves that read the code embedding and the hidden state,
    // so the two never need concatenating.
    MatrixView eh_embedding, eh_hidden;
    GatedAttentionWeights attention;
    MatrixView gate, up, down;
    MatrixView head;  // [codebook_size, dim]; only the per-codebook layers have one
};

struct Weights {
    MatrixView code_embeddings;  // [num_codebooks · codebook_size, dim]: row k·cb + code
    MatrixView candidate_head;   // [semantic tokens + 1, hidden]
    std::vector<TowerLayer> tower;
    std::vector<std::shared_ptr<const void>> storage;
};

// The layer's checkpoint prefix: `audio_decoder_mtp_shared.layers.{t}.` for the shared layers,
// `audio_decoder_mtp.layers.{t − shared}.` after them.
std::string tower_layer_prefix(const TowerConfig& tower, int64_t t);

// Binds the tower and code embeddings; builds the candidate head from `lm_head`. Throws one error
// naming every missing or mis-shaped tensor. With `device` (random weights made on a device), the
// pieces copied out of tensors in its memory are copied there too.
Weights bind_weights(const Config& config, WeightBinder& binder, const MatrixView& lm_head,
                     DeviceTensorStorage* device = nullptr);

}  // namespace duet::drama3
