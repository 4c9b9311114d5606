// Nemotron-H's weights, bound by name from either checkpoint layout the model ships in.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/nemotron_h/config.h"
#include "models/weight_binder.h"

namespace duet::nemotron_h {

struct MambaWeights {
    MatrixView in_proj;   // [z | xBC | dt] rows
    MatrixView out_proj;
    std::vector<float> conv_taps;  // [conv_dim, kernel]
    std::vector<float> conv_bias;
    std::vector<float> a;  // -exp(A_log)
    std::vector<float> d;
    std::vector<float> dt_bias;
    std::vector<float> norm;
};

struct AttentionWeights {
    MatrixView q, k, v, o;
};

struct MlpWeights {
    MatrixView up, down;
};

struct MoeLayerWeights {
    MoeWeights experts;  // its score_bias points into score_bias below
    std::vector<float> score_bias;
};

struct Layer {
    LayerKind kind = LayerKind::Mamba;
    std::vector<float> norm;
    MambaWeights mamba;
    AttentionWeights attention;
    MlpWeights mlp;
    MoeLayerWeights moe;
    int64_t state_slot = 0;  // index among the layers of its kind that keep state
};

// The multi-token-prediction (draft) module: fuses the next token's embedding with the main model's
// final-normed hidden state, then one attention layer and one MoE layer of its own; the main model's
// LM head reads its output.
struct DraftWeights {
    std::vector<float> embed_norm;   // enorm
    std::vector<float> hidden_norm;  // hnorm
    MatrixView fuse;                 // eh_proj [hidden, 2 * hidden] over [embed_norm(e) | hidden_norm(h)]
    std::vector<float> attention_norm;
    AttentionWeights attention;
    std::vector<float> moe_norm;
    MoeLayerWeights moe;
    std::vector<float> output_norm;  // final_layernorm
};

struct Weights {
    MatrixView embed;
    MatrixView lm_head;
    std::vector<float> final_norm;
    std::vector<Layer> layers;
    std::optional<DraftWeights> draft;
    // Whatever the views point into: the mapped checkpoint, widened copies, random weights.
    std::vector<std::shared_ptr<const void>> storage;
};

// The names a checkpoint layout gives each weight.
struct Layout {
    std::string name;          // "hub" or "transcribe"
    std::string embed;
    std::string final_norm;
    std::string layers_prefix;  // "backbone.layers" / "model.layers"
};

// Chooses the layout by which embedding table the checkpoint has.
Layout detect_layout(const WeightBinder& binder, const std::string& source);

// A Transcribe checkpoint may keep the whole LLM under this prefix, beside its `perception.*` tensors.
inline constexpr std::string_view kLlmPrefix = "llm.";
// The prefix every LLM tensor of the checkpoint carries: kLlmPrefix when the embedding table is only
// found under it, else none.
std::string checkpoint_prefix(const TensorLookup& lookup);

// Binds every weight of `config`, and the draft module when `with_draft`; throws one error naming
// every missing or mis-shaped tensor.
Weights bind_weights(const Config& config, WeightBinder& binder, const Layout& layout, bool with_draft);

// The prefix of every draft-module tensor: a checkpoint with any tensor under it must hold the whole
// module.
inline constexpr std::string_view kDraftPrefix = "mtp.";

// ASSUMED: how NeMo exports name a MoE layer's experts as rank-3 tensors ([experts, inter, hidden]
// for up, [experts, hidden, inter] for down), under the MoE prefix.
std::string fused_experts_up_name(const std::string& moe_prefix);
std::string fused_experts_down_name(const std::string& moe_prefix);

}  // namespace duet::nemotron_h
