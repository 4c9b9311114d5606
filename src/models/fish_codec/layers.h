// The codec's building blocks on the CPU, all on time-major activations ([T, C] row-major: one row of
// C channels per time step), all causal. Each layer that looks back keeps what it needs of the past in
// a small state (a conv's left context, a transposed conv's overlap, the transformer's windowed KV),
// so feeding a signal in chunks gives exactly the output of feeding it whole.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned_vector.h"
#include "base/uninitialized_vector.h"
#include "base/thread_pool.h"
#include "models/fish_codec/config.h"
#include "tensor/matrix.h"

namespace duet::fish_codec {

// Activations [steps, channels]: each layer writes its output whole, so it is made uninitialised
// (base/uninitialized_vector.h).
using Signal = UninitializedVector<float>;

// The weights of a product, on a cache line (base/aligned_vector.h).
using MatrixWeights = CacheAlignedVector<float>;

// A dense layer y = W x (+ b). weight [out, in].
struct Linear {
    int64_t in = 0, out = 0;
    MatrixWeights weight;
    std::vector<float> bias;  // empty: no bias

    MatrixView matrix() const { return {DType::F32, out, in, weight.data()}; }
};

// Causal Conv1d: left-padded with (kernel - 1)·dilation + 1 - stride steps of the past (zeros at
// the start). weight [out, kernel · in] in (tap, input channel) order, so a conv is one matmul over
// gathered input windows.
struct Conv {
    int64_t in = 0, out = 0, kernel = 1, dilation = 1, stride = 1;
    MatrixWeights weight;
    std::vector<float> bias;

    int64_t context() const { return (kernel - 1) * dilation + 1 - stride; }
    MatrixView matrix() const { return {DType::F32, out, kernel * in, weight.data()}; }
};

// Causal ConvTranspose1d with kernel = stride or 2·stride, trimmed on the right to T·stride steps.
// weight [kernel · out, in]: row (tap j, output channel o).
struct ConvTranspose {
    int64_t in = 0, out = 0, kernel = 1, stride = 1;
    MatrixWeights weight;
    std::vector<float> bias;

    MatrixView matrix() const { return {DType::F32, kernel * out, in, weight.data()}; }
};

// Depthwise causal conv (ConvNeXt). weight [kernel, channels].
struct DepthwiseConv {
    int64_t channels = 0, kernel = 1;
    std::vector<float> weight;
    std::vector<float> bias;
};

// Snake: x + sin²(α x) / (α + 1e-9), per channel.
struct Snake {
    std::vector<float> alpha;
    std::vector<float> inv_alpha;  // 1 / (α + 1e-9), rounded as PyTorch does in f32
};

struct ResidualUnit {
    Snake snake1;
    Conv conv1;  // kernel 7, dilated
    Snake snake2;
    Conv conv2;  // kernel 1
};

struct ConvNeXt {
    DepthwiseConv dwconv;
    std::vector<float> norm_weight, norm_bias;  // LayerNorm, eps 1e-6
    Linear pwconv1, pwconv2;
    std::vector<float> gamma;
};

struct TransformerLayer {
    std::vector<float> attention_norm, ffn_norm, attention_scale, ffn_scale;
    Linear wqkv, wo, w1, w3, w2;
};

struct Transformer {
    TransformerConfig config;
    std::vector<TransformerLayer> layers;
    std::vector<float> norm;
};

// ---- Per-stream state ----

struct ConvState {
    std::vector<float> history;  // the last context() input rows, zeros before the start
};
struct ConvTransposeState {
    std::vector<float> overlap;  // the previous step's taps that land on the next output steps
};
struct ResidualUnitState {
    ConvState conv1, conv2;
};
struct ConvNeXtState {
    ConvState dwconv;  // history of the depthwise conv
};
struct TransformerState {
    int64_t position = 0;                     // absolute position of the next input step
    std::vector<std::vector<float>> keys, values;  // per layer: the last window - 1 steps, RoPE applied
};

ConvState new_state(const Conv& conv);
ConvState new_state(const DepthwiseConv& conv);
ConvTransposeState new_state(const ConvTranspose& conv);
ResidualUnitState new_state(const ResidualUnit& unit);
ConvNeXtState new_state(const ConvNeXt& block);
TransformerState new_state(const Transformer& t);

// ---- Forward, on `steps` time steps ----

// [steps, in] → [steps / stride, out]; steps must be a multiple of the stride.
Signal causal_conv(const Conv& conv, ConvState& state, const float* x, int64_t steps, ThreadPool* pool);
// [steps, in] → [steps · stride, out].
Signal conv_transpose(const ConvTranspose& conv, ConvTransposeState& state, const float* x, int64_t steps,
                                  ThreadPool* pool);
// In place on [steps, channels].
void snake(const Snake& s, float* x, int64_t steps, ThreadPool* pool);
void residual_unit(const ResidualUnit& unit, ResidualUnitState& state, Signal& x, int64_t steps,
                   ThreadPool* pool);
void convnext(const ConvNeXt& block, ConvNeXtState& state, Signal& x, int64_t steps, ThreadPool* pool);
void transformer(const Transformer& t, TransformerState& state, Signal& x, int64_t steps,
                 ThreadPool* pool);
// x += y over [steps, width], spread over the pool.
void add_rows(float* x, const float* y, int64_t steps, int64_t width, ThreadPool* pool);
// history = the last `context` rows (of `width`) of [history; x], x having `steps` rows.
void keep_last_rows(std::vector<float>& history, int64_t context, const float* x, int64_t steps, int64_t width);

// [steps, in] → [steps, out] (plus bias).
Signal linear(const Linear& l, const float* x, int64_t steps, ThreadPool* pool);

// cos and sin of position · θᵢ for the head's dim / 2 interleaved pairs, rounded to bf16 (fish-speech
// builds its table in bf16) and widened back to f32.
void rope_table_bf16(int64_t position, int64_t head_dim, float base, float* cos_out, float* sin_out);

}  // namespace duet::fish_codec
