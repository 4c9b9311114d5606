// Qwen3.5-style gated attention, shared by the Qwen3.5-MoE backbone and Drama 3's codebook tower:
// q_proj gives each head [query | gate]; queries and keys are RMS-normalised per head and rotated
// (partial RoPE); GQA over the key/value cache; the output is multiplied by sigmoid(gate) and
// projected by o_proj.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "models/decode_step.h"
#include "models/normed_input.h"

namespace duet {

// The marks after the layer's ops (Backend::mark), so that a step's spans tell the tower's from the
// backbone's.
struct GatedAttentionMarks {
    std::string_view qkv, rows, core;
};
inline constexpr GatedAttentionMarks kGatedAttentionMarks{"gated attention: norm, qkv", "gated attention: rows",
                                                          "gated attention: core"};

struct GatedAttentionShape {
    int64_t heads = 0, kv_heads = 0, head_dim = 0;
    int64_t rotary_dim = 0;
    float theta = 0.0f;
    float eps = 0.0f;
    RopeStyle rope = RopeStyle::RotateHalf;
    GatedAttentionMarks marks = kGatedAttentionMarks;
};

struct GatedAttentionWeights {
    MatrixView q;  // [heads · 2 · head_dim, in]: per head [query | gate]
    MatrixView k, v, o;
    std::vector<float> q_norm, k_norm;  // multiply the normalised values (zero-centred ones already 1 + w)
};

// Scratch activations for up to n tokens.
struct GatedAttentionScratch {
    GatedAttentionScratch(Backend& backend, const GatedAttentionShape& shape, int64_t n);
    Buffer query_and_gate, new_keys, new_values, queries, attended;
};

// out[n, o.rows] += attention for the normalised input xn[n, in] at positions at.pos..at.pos+n−1
// (out is the residual stream). The new keys and values are written into the caches' rows there
// ([capacity, kv_heads · head_dim] each).
void gated_attention(Backend& backend, const GatedAttentionShape& shape, const GatedAttentionWeights& w,
                     const NormedInput& xn, const StepPosition& at, float* keys, float* values,
                     GatedAttentionScratch& scratch, float* out);

}  // namespace duet
