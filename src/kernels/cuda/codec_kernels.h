// The Fish codec decoder's element-wise and small kernels on the GPU (its products go through
// cuBLAS). Activations are f32 and time-major, [steps, channels] row-major, as on the CPU
// (models/fish_codec/layers.h); every launcher queues its work on `stream` and returns at once.
// Host-only header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace duet::cuda::codec {

// x[t, :] += sign · (bias + W · entries[min(code, entry_count - 1)]) for code = codes[t · books + book]:
// one codebook's projected entries added to the latent (or, with sign -1, taken from what a quantizer
// leaves). weight [width, dim]; bias may be null.
void add_code_projection(float* x, const int32_t* codes, int64_t books, int64_t book, int64_t steps,
                         const float* entries, int64_t entry_count, int64_t dim, const float* weight,
                         const float* bias, int64_t width, cudaStream_t stream, float sign = 1.0f);

// codes[t · books + book] = the code nearest by cosine to row t of projected [steps, dim], as the CPU's
// quantizer finds it: normalized [size, dim] (the entries over their norms), code_squares [size] the
// squares of those rows.
void nearest_codes(const float* projected, int64_t steps, int64_t dim, const float* normalized,
                   const float* code_squares, int64_t size, int32_t* codes, int64_t books, int64_t book,
                   cudaStream_t stream);

// A causal conv's input windows: gathered[t, k · in + c] = padded[t · stride + k · dilation, c], where
// padded is the `context` rows of history followed by x's rows.
void gather_windows(const float* history, int64_t context, const float* x, int64_t in, int64_t out_steps,
                    int64_t kernel, int64_t dilation, int64_t stride, float* gathered, cudaStream_t stream);

// next_history = the last `context` rows of [history; x] (x has `steps` rows). Must not alias history.
void keep_last_rows(const float* history, int64_t context, const float* x, int64_t steps, int64_t width,
                    float* next_history, cudaStream_t stream);

// y[t, :] += bias.
void add_bias_rows(float* y, const float* bias, int64_t rows, int64_t width, cudaStream_t stream);

// A transposed conv's outputs from its taps: products [steps, kernel · out_dim] (tap j of input step q
// lands on output step q · stride + j); out [steps · stride, out_dim] = bias + this step's taps 0..s-1
// + the previous step's taps s..2s-1 (from `overlap` for the first step) when `overlap` is not null.
void overlap_add(const float* products, int64_t steps, int64_t stride, int64_t out_dim, const float* bias,
                 const float* overlap, float* out, cudaStream_t stream);

// x += inv_alpha · sin²(alpha · x), per channel.
void snake(float* x, const float* alpha, const float* inv_alpha, int64_t steps, int64_t channels,
           cudaStream_t stream);

// out[t, c] = bias[c] + Σₖ weight[k, c] · padded[t + k, c], padded = the kernel - 1 history rows, then x.
void depthwise_causal_conv(const float* history, const float* x, int64_t steps, int64_t channels, int64_t kernel,
                           const float* weight, const float* bias, float* out, cudaStream_t stream);

// In place: (x - mean) / sqrt(var + eps) · weight + bias, per row.
void layer_norm_rows(float* x, const float* weight, const float* bias, int64_t rows, int64_t width, float eps,
                     cudaStream_t stream);

// out = weight · x / rms(x), per row.
void rms_norm_rows(const float* x, const float* weight, int64_t rows, int64_t width, float eps, float* out,
                   cudaStream_t stream);

// PyTorch's exact (erf) GELU, in place.
void gelu(float* x, int64_t n, cudaStream_t stream);
// gate = silu(gate) · up.
void silu_mul(float* gate, const float* up, int64_t n, cudaStream_t stream);
// x[t, c] += scale[c] · y[t, c]; a null scale adds y as it is.
void add_scaled_rows(float* x, const float* scale, const float* y, int64_t rows, int64_t width,
                     cudaStream_t stream);
// In place.
void tanh_all(float* x, int64_t n, cudaStream_t stream);

// Rotates interleaved pairs of the first `heads` heads of each row (rows `row_stride` apart) by the
// row's angles: cos/sin [steps, head_dim / 2].
void rotate_pairs(float* rows, int64_t steps, int64_t row_stride, int64_t heads, int64_t head_dim,
                  const float* cos, const float* sin, cudaStream_t stream);

// Softmax attention of `steps` queries (rows q_stride apart) over `total` keys and values
// ([total, n_head · head_dim]), the last `steps` of which are the queries' own; query t sees its last
// `window` positions. out [steps, n_head · head_dim].
void windowed_attention(const float* q, int64_t q_stride, const float* keys, const float* values, int64_t total,
                        int64_t steps, int64_t n_head, int64_t head_dim, int64_t window, float* out,
                        cudaStream_t stream);

}  // namespace duet::cuda::codec
