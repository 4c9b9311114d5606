// Rotary position embedding, rotate-half (NeoX) or interleaved (GPT-J) form, applied to the leading rotary_dim values of
// a head and leaving the rest as they are (partial RoPE).
#pragma once

#include <cstdint>

namespace duet::cpu {

// cos and sin of position · inv_freq[i] for i < rotary_dim / 2, inv_freq[i] = 1 / theta^(2i / rotary_dim),
// computed in f32 the way the reference computes its tables.
void rope_angles(int64_t position, int64_t rotary_dim, float theta, float* cos_out, float* sin_out);

// x[i] ← x[i]·cos_i − x[i + d/2]·sin_i and x[i + d/2] ← x[i + d/2]·cos_i + x[i]·sin_i for i < d/2,
// d = rotary_dim.
void rope_rotate_half(float* x, int64_t rotary_dim, const float* cos, const float* sin);

// x[2i] ← x[2i]·cos_i − x[2i+1]·sin_i and x[2i+1] ← x[2i+1]·cos_i + x[2i]·sin_i for i < d/2 (GPT-J pairs).
void rope_interleaved(float* x, int64_t rotary_dim, const float* cos, const float* sin);

}  // namespace duet::cpu
