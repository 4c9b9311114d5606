// The small kernels of Transcribe's speech encoders on the GPU (backend/cuda/cuda_speech_encoder.h;
// the products go through cuBLAS, the LayerNorms, GELU and bias additions through codec_kernels.h).
// f32 rows, row-major; every launcher queues its work on `stream`. Host-only header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace duet::cuda::speech {

// In place on qkv rows [n, 3 · width] ([q | k | v], `heads` heads of head_dim each): every head of q
// and of k LayerNormed over head_dim (weights and biases [head_dim]; all four null: no norm), then
// rotate-half RoPE on its first rotary_dim values with row t's angles cos/sin [n, rotary_dim / 2].
struct HeadNormRopeRows {
    float* qkv = nullptr;
    int64_t n = 0, width = 0, heads = 0, head_dim = 0, rotary_dim = 0;
    const float* q_weight = nullptr;
    const float* q_bias = nullptr;
    const float* k_weight = nullptr;
    const float* k_bias = nullptr;
    float eps = 0.0f;
    const float* cos = nullptr;
    const float* sin = nullptr;
};
void head_norm_rope_rows(const HeadNormRopeRows& args, cudaStream_t stream);

// Softmax over each of `rows` rows of `count` values, in place.
void softmax_rows(float* x, int64_t rows, int64_t count, cudaStream_t stream);

}  // namespace duet::cuda::speech
