// Qwen3.5-MoE's weights, bound by name under whichever prefix the checkpoint uses and with the
// experts stored either one tensor per expert or fused into rank-3 tensors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/gated_attention.h"
#include "models/qwen35_moe/config.h"
#include "models/weight_binder.h"

namespace duet::qwen35_moe {

struct LinearAttentionWeights {
    MatrixView qkv;  // in_proj_qkv: [q | k | v] rows
    MatrixView z, b, a, out;
    std::vector<float> conv_taps;      // [conv_dim, kernel]
    std::vector<float> neg_exp_a_log;  // −exp(A_log)
    std::vector<float> dt_bias;
    std::vector<float> norm;  // the output norm's plain weight [v_dim]
};

// q_norm and k_norm are zero-centred in the checkpoint, turned into 1 + w at load.
using FullAttentionWeights = GatedAttentionWeights;

struct Layer {
    LayerKind kind = LayerKind::LinearAttention;
    std::vector<float> input_norm, post_norm;  // 1 + w
    LinearAttentionWeights linear;
    FullAttentionWeights attention;
    SwigluMoeWeights moe;
    int64_t state_slot = 0;  // index among the layers of its kind
};

struct Weights {
    MatrixView embed;
    MatrixView lm_head;
    std::vector<float> final_norm;  // 1 + w
    std::vector<Layer> layers;
    std::vector<std::shared_ptr<const void>> storage;
};

struct Layout {
    std::string prefix;   // "model.language_model.", "model." or "text_model.model."
    std::string lm_head;  // the LM head's name
    bool fused_experts = false;
    std::string describe() const;
};

// Chooses the prefix by which embedding table the checkpoint has, and the expert storage by
// whether layer 0 has fused expert tensors.
Layout detect_layout(const WeightBinder& binder, const std::string& source);

// Binds every weight of `config`; throws one error naming every missing or mis-shaped tensor.
Weights bind_weights(const Config& config, WeightBinder& binder, const Layout& layout);

// Zero-centred RMSNorm weights scale by 1 + w; the kernels take that factor directly.
std::vector<float> zero_centred_to_scale(std::vector<float> w);

}  // namespace duet::qwen35_moe
