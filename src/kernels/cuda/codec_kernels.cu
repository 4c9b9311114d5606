#include "kernels/cuda/codec_kernels.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"

namespace duet::cuda::codec {

namespace {

constexpr int kThreads = 256;
// A row's reductions (norms, attention) take a block of this many threads.
constexpr int kRowThreads = 256;
constexpr int64_t kMaxCodeDim = 32;  // values a quantizer's code has, at most (the codec's: 8)
// The attention kernel's static shared memory for its block reductions (one float a warp, at most 32).
constexpr int kReduceFloats = 32;

unsigned blocks_for(int64_t count) {
    return static_cast<unsigned>(std::max<int64_t>(1, (count + kThreads - 1) / kThreads));
}

// Row r of [history (context rows); x].
__device__ __forceinline__ const float* padded_row(const float* history, int64_t context, const float* x,
                                                   int64_t width, int64_t r) {
    return r < context ? history + r * width : x + (r - context) * width;
}

__global__ void add_code_projection_kernel(float* x, const int32_t* codes, int64_t books, int64_t book, int64_t steps,
                                           const float* entries, int64_t entry_count, int64_t dim,
                                           const float* weight, const float* bias, int64_t width, float sign) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= steps * width) return;
    const int64_t t = i / width, o = i % width;
    const int64_t code = min(static_cast<int64_t>(codes[t * books + book]), entry_count - 1);
    const float* entry = entries + code * dim;
    const float* w = weight + o * dim;
    float dot = 0.0f;
    for (int64_t k = 0; k < dim; ++k) dot += w[k] * entry[k];
    x[i] += sign * (bias != nullptr ? dot + bias[o] : dot);
}

// One block a step: the code nearest to the step's projected row by cosine, computed as the CPU's
// quantizer does (the row normalised, then |e|² - 2 e·c + |c|², the first of equal distances).
__global__ void nearest_codes_kernel(const float* projected, int64_t dim, const float* normalized,
                                     const float* code_squares, int64_t size, int32_t* codes, int64_t books,
                                     int64_t book) {
    __shared__ float e[kMaxCodeDim];
    __shared__ float e_squares;
    __shared__ float best_distance[kRowThreads / kWarpSize];
    __shared__ int32_t best_index[kRowThreads / kWarpSize];
    const int64_t t = blockIdx.x;
    if (threadIdx.x == 0) {
        // One thread, in the CPU's order: the norm, the normalised row, its squares.
        const float* row = projected + t * dim;
        float squares = 0.0f;
        for (int64_t i = 0; i < dim; ++i) squares += row[i] * row[i];
        const float norm = fmaxf(sqrtf(squares), 1e-12f);
        float sum = 0.0f;
        for (int64_t i = 0; i < dim; ++i) {
            e[i] = row[i] / norm;
            sum += e[i] * e[i];
        }
        e_squares = sum;
    }
    __syncthreads();
    float best = INFINITY;
    int32_t index = static_cast<int32_t>(size);
    for (int64_t k = threadIdx.x; k < size; k += blockDim.x) {
        const float* code = normalized + k * dim;
        float dot = 0.0f;
        for (int64_t i = 0; i < dim; ++i) dot += e[i] * code[i];
        const float distance = e_squares - 2.0f * dot + code_squares[k];
        if (distance < best) best = distance, index = static_cast<int32_t>(k);
    }
    // The smallest distance, the lowest index among equal ones.
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        const float other = __shfl_xor_sync(0xFFFFFFFFu, best, offset);
        const int32_t other_index = __shfl_xor_sync(0xFFFFFFFFu, index, offset);
        if (other < best || (other == best && other_index < index)) best = other, index = other_index;
    }
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    if (lane == 0) best_distance[warp] = best, best_index[warp] = index;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kRowThreads / kWarpSize; ++w) {
            if (best_distance[w] < best || (best_distance[w] == best && best_index[w] < index)) {
                best = best_distance[w], index = best_index[w];
            }
        }
        // Every distance NaN (a NaN row): the first code, as the CPU's loop leaves it.
        codes[t * books + book] = index < size ? index : 0;
    }
}

__global__ void gather_windows_kernel(const float* history, int64_t context, const float* x, int64_t in,
                                      int64_t out_steps, int64_t kernel, int64_t dilation, int64_t stride,
                                      float* gathered) {
    const int64_t window = kernel * in;
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= out_steps * window) return;
    const int64_t t = i / window, k = (i % window) / in, c = i % in;
    gathered[i] = padded_row(history, context, x, in, t * stride + k * dilation)[c];
}

__global__ void keep_last_rows_kernel(const float* history, int64_t context, const float* x, int64_t steps,
                                      int64_t width, float* next_history) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= context * width) return;
    const int64_t r = i / width, c = i % width;
    next_history[i] = padded_row(history, context, x, width, steps + r)[c];
}

__global__ void add_bias_rows_kernel(float* y, const float* bias, int64_t rows, int64_t width) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < rows * width) y[i] += bias[i % width];
}

__global__ void overlap_add_kernel(const float* products, int64_t steps, int64_t stride, int64_t out_dim,
                                   const float* bias, const float* overlap, float* out) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= steps * stride * out_dim) return;
    const int64_t taps = (overlap != nullptr ? 2 : 1) * stride * out_dim;
    const int64_t q = i / (stride * out_dim), at = i % (stride * out_dim), o = i % out_dim;
    float value = bias[o] + products[q * taps + at];
    if (overlap != nullptr)
        value += q > 0 ? products[(q - 1) * taps + stride * out_dim + at] : overlap[at];
    out[i] = value;
}

__global__ void snake_kernel(float* x, const float* alpha, const float* inv_alpha, int64_t count, int64_t channels) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= count) return;
    const int64_t c = i % channels;
    const float s = sinf(alpha[c] * x[i]);
    x[i] += inv_alpha[c] * (s * s);
}

__global__ void depthwise_causal_conv_kernel(const float* history, const float* x, int64_t steps, int64_t channels,
                                             int64_t kernel, const float* weight, const float* bias, float* out) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= steps * channels) return;
    const int64_t t = i / channels, c = i % channels;
    float value = bias[c];
    for (int64_t k = 0; k < kernel; ++k)
        value += weight[k * channels + c] * padded_row(history, kernel - 1, x, channels, t + k)[c];
    out[i] = value;
}

// One block a row.
__global__ void layer_norm_rows_kernel(float* x, const float* weight, const float* bias, int64_t width, float eps) {
    __shared__ float shared[32];
    float* row = x + blockIdx.x * width;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) sum += row[c];
    const float mean = block_sum(sum, shared) / static_cast<float>(width);
    float squares = 0.0f;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) squares += (row[c] - mean) * (row[c] - mean);
    const float inv_std = rsqrtf(block_sum(squares, shared) / static_cast<float>(width) + eps);
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) row[c] = (row[c] - mean) * inv_std * weight[c] + bias[c];
}

// One block a row.
__global__ void rms_norm_rows_kernel(const float* x, const float* weight, int64_t width, float eps, float* out) {
    __shared__ float shared[32];
    const float* row = x + blockIdx.x * width;
    float squares = 0.0f;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) squares += row[c] * row[c];
    const float inv = rsqrtf(block_sum(squares, shared) / static_cast<float>(width) + eps);
    float* dst = out + blockIdx.x * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) dst[c] = weight[c] * (row[c] * inv);
}

__global__ void gelu_kernel(float* x, int64_t n) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

__global__ void silu_mul_kernel(float* gate, const float* up, int64_t n) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) gate[i] = silu(gate[i]) * up[i];
}

__global__ void add_scaled_rows_kernel(float* x, const float* scale, const float* y, int64_t count, int64_t width) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < count) x[i] += scale != nullptr ? scale[i % width] * y[i] : y[i];
}

__global__ void tanh_kernel(float* x, int64_t n) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) x[i] = tanhf(x[i]);
}

__global__ void rotate_pairs_kernel(float* rows, int64_t steps, int64_t row_stride, int64_t heads, int64_t head_dim,
                                    const float* cos, const float* sin) {
    const int64_t half = head_dim / 2;
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= steps * heads * half) return;
    const int64_t t = i / (heads * half), h = (i / half) % heads, p = i % half;
    float* pair = rows + t * row_stride + h * head_dim + 2 * p;
    const float a = pair[0], b = pair[1], c = cos[t * half + p], s = sin[t * half + p];
    pair[0] = a * c - b * s;
    pair[1] = b * c + a * s;
}

// One block a (query step, head); scores in dynamic shared memory, one a visible key.
__global__ void windowed_attention_kernel(const float* q, int64_t q_stride, const float* keys, const float* values,
                                          int64_t total, int64_t steps, int64_t n_head, int64_t head_dim,
                                          int64_t window, float* out) {
    extern __shared__ float scores[];
    __shared__ float reduce[kReduceFloats];
    const int64_t t = blockIdx.x / n_head, h = blockIdx.x % n_head, width = n_head * head_dim;
    const int64_t last = total - steps + t, first = max(int64_t{0}, last - window + 1), count = last - first + 1;
    const float* query = q + t * q_stride + h * head_dim;
    const float scale = rsqrtf(static_cast<float>(head_dim));
    float best = -INFINITY;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
        const float* key = keys + (first + j) * width + h * head_dim;
        float dot = 0.0f;
        for (int64_t d = 0; d < head_dim; ++d) dot += query[d] * key[d];
        scores[j] = dot * scale;
        best = fmaxf(best, dot * scale);
    }
    best = block_max(best, reduce);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
        scores[j] = expf(scores[j] - best);
        sum += scores[j];
    }
    const float inv_sum = 1.0f / block_sum(sum, reduce);  // its barriers also publish the scores
    for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float acc = 0.0f;
        for (int64_t j = 0; j < count; ++j) acc += scores[j] * inv_sum * values[(first + j) * width + h * head_dim + d];
        out[t * width + h * head_dim + d] = acc;
    }
}

}  // namespace

void add_code_projection(float* x, const int32_t* codes, int64_t books, int64_t book, int64_t steps,
                         const float* entries, int64_t entry_count, int64_t dim, const float* weight,
                         const float* bias, int64_t width, cudaStream_t stream, float sign) {
    if (steps == 0) return;
    add_code_projection_kernel<<<blocks_for(steps * width), kThreads, 0, stream>>>(
        x, codes, books, book, steps, entries, entry_count, dim, weight, bias, width, sign);
    DUET_CUDA_CHECK_LAUNCH("add_code_projection_kernel");
}

void nearest_codes(const float* projected, int64_t steps, int64_t dim, const float* normalized,
                   const float* code_squares, int64_t size, int32_t* codes, int64_t books, int64_t book,
                   cudaStream_t stream) {
    require(dim >= 1 && dim <= kMaxCodeDim && size >= 1, "codec quantizer on the GPU: codes of ", dim,
            " values (at most ", kMaxCodeDim, "), ", size, " of them");
    if (steps == 0) return;
    nearest_codes_kernel<<<static_cast<unsigned>(steps), kRowThreads, 0, stream>>>(projected, dim, normalized,
                                                                                   code_squares, size, codes, books,
                                                                                   book);
    DUET_CUDA_CHECK_LAUNCH("nearest_codes_kernel");
}

void gather_windows(const float* history, int64_t context, const float* x, int64_t in, int64_t out_steps,
                    int64_t kernel, int64_t dilation, int64_t stride, float* gathered, cudaStream_t stream) {
    if (out_steps == 0) return;
    gather_windows_kernel<<<blocks_for(out_steps * kernel * in), kThreads, 0, stream>>>(
        history, context, x, in, out_steps, kernel, dilation, stride, gathered);
    DUET_CUDA_CHECK_LAUNCH("gather_windows_kernel");
}

void keep_last_rows(const float* history, int64_t context, const float* x, int64_t steps, int64_t width,
                    float* next_history, cudaStream_t stream) {
    if (context == 0) return;
    keep_last_rows_kernel<<<blocks_for(context * width), kThreads, 0, stream>>>(history, context, x, steps, width,
                                                                                  next_history);
    DUET_CUDA_CHECK_LAUNCH("keep_last_rows_kernel");
}

void add_bias_rows(float* y, const float* bias, int64_t rows, int64_t width, cudaStream_t stream) {
    if (bias == nullptr || rows == 0) return;
    add_bias_rows_kernel<<<blocks_for(rows * width), kThreads, 0, stream>>>(y, bias, rows, width);
    DUET_CUDA_CHECK_LAUNCH("add_bias_rows_kernel");
}

void overlap_add(const float* products, int64_t steps, int64_t stride, int64_t out_dim, const float* bias,
                 const float* overlap, float* out, cudaStream_t stream) {
    if (steps == 0) return;
    overlap_add_kernel<<<blocks_for(steps * stride * out_dim), kThreads, 0, stream>>>(products, steps, stride,
                                                                                       out_dim, bias, overlap, out);
    DUET_CUDA_CHECK_LAUNCH("overlap_add_kernel");
}

void snake(float* x, const float* alpha, const float* inv_alpha, int64_t steps, int64_t channels,
           cudaStream_t stream) {
    if (steps == 0) return;
    snake_kernel<<<blocks_for(steps * channels), kThreads, 0, stream>>>(x, alpha, inv_alpha, steps * channels,
                                                                         channels);
    DUET_CUDA_CHECK_LAUNCH("snake_kernel");
}

void depthwise_causal_conv(const float* history, const float* x, int64_t steps, int64_t channels, int64_t kernel,
                           const float* weight, const float* bias, float* out, cudaStream_t stream) {
    if (steps == 0) return;
    depthwise_causal_conv_kernel<<<blocks_for(steps * channels), kThreads, 0, stream>>>(history, x, steps, channels,
                                                                                         kernel, weight, bias, out);
    DUET_CUDA_CHECK_LAUNCH("depthwise_causal_conv_kernel");
}

void layer_norm_rows(float* x, const float* weight, const float* bias, int64_t rows, int64_t width, float eps,
                     cudaStream_t stream) {
    if (rows == 0) return;
    layer_norm_rows_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, weight, bias, width, eps);
    DUET_CUDA_CHECK_LAUNCH("layer_norm_rows_kernel");
}

void rms_norm_rows(const float* x, const float* weight, int64_t rows, int64_t width, float eps, float* out,
                   cudaStream_t stream) {
    if (rows == 0) return;
    rms_norm_rows_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, weight, width, eps, out);
    DUET_CUDA_CHECK_LAUNCH("rms_norm_rows_kernel");
}

void gelu(float* x, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    gelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n);
    DUET_CUDA_CHECK_LAUNCH("gelu_kernel");
}

void silu_mul(float* gate, const float* up, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    silu_mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate, up, n);
    DUET_CUDA_CHECK_LAUNCH("silu_mul_kernel");
}

void add_scaled_rows(float* x, const float* scale, const float* y, int64_t rows, int64_t width,
                     cudaStream_t stream) {
    if (rows == 0) return;
    add_scaled_rows_kernel<<<blocks_for(rows * width), kThreads, 0, stream>>>(x, scale, y, rows * width, width);
    DUET_CUDA_CHECK_LAUNCH("add_scaled_rows_kernel");
}

void tanh_all(float* x, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    tanh_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n);
    DUET_CUDA_CHECK_LAUNCH("tanh_kernel");
}

void rotate_pairs(float* rows, int64_t steps, int64_t row_stride, int64_t heads, int64_t head_dim,
                  const float* cos, const float* sin, cudaStream_t stream) {
    if (steps == 0) return;
    rotate_pairs_kernel<<<blocks_for(steps * heads * (head_dim / 2)), kThreads, 0, stream>>>(
        rows, steps, row_stride, heads, head_dim, cos, sin);
    DUET_CUDA_CHECK_LAUNCH("rotate_pairs_kernel");
}

void windowed_attention(const float* q, int64_t q_stride, const float* keys, const float* values, int64_t total,
                        int64_t steps, int64_t n_head, int64_t head_dim, int64_t window, float* out,
                        cudaStream_t stream) {
    if (steps == 0) return;
    const int64_t visible = std::min(window, total);
    // Whole groups of four scores: the compiler reads the last few scores as one 16-byte load (found
    // by compute-sanitizer), whatever their count.
    const size_t shared_bytes = static_cast<size_t>((visible + 3) / 4 * 4) * sizeof(float);
    // The scores beside the kernel's 32 floats of static shared memory, within a block's default 48 KiB.
    require(shared_bytes + kReduceFloats * sizeof(float) <= 48 * 1024, "codec attention: a window of ", visible,
            " keys does not fit a block");
    windowed_attention_kernel<<<static_cast<unsigned>(steps * n_head), kRowThreads, shared_bytes, stream>>>(
        q, q_stride, keys, values, total, steps, n_head, head_dim, window, out);
    DUET_CUDA_CHECK_LAUNCH("windowed_attention_kernel");
}

}  // namespace duet::cuda::codec
