#include "backend/cuda/cuda_codec_layers.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "base/error.h"
#include "kernels/cuda/codec_kernels.h"
#include "kernels/cuda/cuda_check.h"

namespace duet::cuda {

namespace fc = fish_codec;

namespace {


// A buffer zeroed on `stream`: work queued on that stream afterwards sees the zeros, and nothing
// else on the device has to finish first.
DeviceBuffer zeros(size_t bytes, cudaStream_t stream) {
    DeviceBuffer buffer(bytes);
    if (bytes > 0) DUET_CUDA_CHECK(cudaMemsetAsync(buffer.data(), 0, bytes, stream));
    return buffer;
}

}  // namespace

// ---- Weights ----

template <typename Layer>
void CudaCodecWeights::upload_layer(const Layer& layer) {
    if constexpr (std::is_same_v<Layer, fc::Linear> || std::is_same_v<Layer, fc::Conv> ||
                  std::is_same_v<Layer, fc::ConvTranspose>) {
        upload(layer.weight.data(), layer.weight.size());
        upload(layer.bias.data(), layer.bias.size());
    } else if constexpr (std::is_same_v<Layer, fc::Snake>) {
        upload(layer.alpha.data(), layer.alpha.size());
        upload(layer.inv_alpha.data(), layer.inv_alpha.size());
    } else if constexpr (std::is_same_v<Layer, fc::ResidualUnit>) {
        upload_layer(layer.snake1), upload_layer(layer.conv1), upload_layer(layer.snake2), upload_layer(layer.conv2);
    } else if constexpr (std::is_same_v<Layer, fc::ConvNeXt>) {
        upload(layer.dwconv.weight.data(), layer.dwconv.weight.size());
        upload(layer.dwconv.bias.data(), layer.dwconv.bias.size());
        for (const std::vector<float>* v : {&layer.norm_weight, &layer.norm_bias, &layer.gamma}) upload(v->data(), v->size());
        upload_layer(layer.pwconv1), upload_layer(layer.pwconv2);
    } else if constexpr (std::is_same_v<Layer, fc::Transformer>) {
        for (const fc::TransformerLayer& l : layer.layers) {
            for (const std::vector<float>* v : {&l.attention_norm, &l.ffn_norm, &l.attention_scale, &l.ffn_scale})
                upload(v->data(), v->size());
            for (const fc::Linear* lin : {&l.wqkv, &l.wo, &l.w1, &l.w3, &l.w2}) upload_layer(*lin);
        }
        upload(layer.norm.data(), layer.norm.size());
    } else {
        static_assert(std::is_same_v<Layer, fc::Codebook>, "a codec layer the GPU does not use");
        upload(layer.entries.data(), layer.entries.size());
        upload(layer.normalized.data(), layer.normalized.size());
        upload_layer(layer.in_proj), upload_layer(layer.out_proj);
    }
}

CudaCodecWeights::CudaCodecWeights(const fc::FishCodec& codec, Half half)
    : config_(std::make_shared<const fc::Config>(codec.config())), host_(codec.weights()) {
    const fc::Weights& w = *host_;
    for (const std::vector<fc::Codebook>* books : {&w.semantic, &w.residual})
        for (const fc::Codebook& cb : *books) upload_layer(cb);
    if (half == Half::encoder) {
        upload_layer(w.encoder_in);
        for (const fc::EncoderBlock& b : w.encoder_blocks) {
            for (const fc::ResidualUnit& u : b.units) upload_layer(u);
            upload_layer(b.snake), upload_layer(b.downsample);
            if (b.has_transformer) upload_layer(b.transformer);
        }
        upload_layer(w.encoder_snake);
        upload_layer(w.encoder_out);
        for (const fc::Resample& r : w.downsample) upload_layer(r.down), upload_layer(r.block);
        upload_layer(w.pre_module);
    } else {
        upload_layer(w.post_module);
        for (const fc::Resample& r : w.upsample) upload_layer(r.up), upload_layer(r.block);
        upload_layer(w.decoder_in);
        for (const fc::DecoderBlock& b : w.decoder_blocks) {
            upload_layer(b.snake), upload_layer(b.upsample);
            for (const fc::ResidualUnit& u : b.units) upload_layer(u);
        }
        upload_layer(w.decoder_snake);
        upload_layer(w.decoder_out);
    }
    // A copy from pageable memory may return before its bytes reach the device, and a decoder's
    // non-blocking stream is not ordered after the default stream's copies.
    DUET_CUDA_CHECK(cudaDeviceSynchronize());
}

void CudaCodecWeights::upload(const float* host, size_t count) {
    if (count == 0 || device_.contains(host)) return;
    DeviceBuffer buffer(count * sizeof(float));
    buffer.copy_from_host(host, count * sizeof(float));
    device_.emplace(host, std::move(buffer));
}

const float* CudaCodecWeights::find(const float* host, size_t count) const {
    if (count == 0) return nullptr;
    const auto it = device_.find(host);
    require(it != device_.end(), "codec on the GPU: a weight array that was not uploaded");
    return it->second.as<float>();
}

// ---- Layers ----

CudaCodecLayers::CudaCodecLayers(std::shared_ptr<const CudaCodecWeights> weights) : weights_(std::move(weights)) {}

CudaCodecLayers::RowHistory CudaCodecLayers::zero_history(int64_t context, int64_t width) {
    RowHistory h;
    h.context = context, h.width = width;
    h.rows = zeros(static_cast<size_t>(context * width) * sizeof(float), blas_.stream());
    h.next = DeviceBuffer(static_cast<size_t>(context * width) * sizeof(float));
    return h;
}

CudaCodecLayers::TransformerState CudaCodecLayers::zero_transformer(const fc::Transformer& t) const {
    TransformerState state;
    state.caches.resize(t.layers.size());
    return state;
}

CudaCodecLayers::ResidualUnitState CudaCodecLayers::zero_unit(const fc::ResidualUnit& unit) {
    return {zero_history(unit.conv1), zero_history(unit.conv2)};
}

CudaCodecLayers::Overlap CudaCodecLayers::zero_overlap(const fc::ConvTranspose& conv) {
    return {zeros(static_cast<size_t>((conv.kernel - conv.stride) * conv.out) * sizeof(float),
                  blas_.stream())};
}

void CudaCodecLayers::linear(const fc::Linear& l, const float* x, int64_t steps, DeviceBuffer& out) {
    float* y = grown(out, steps * l.out);
    blas_.product((*weights_)(l.weight), l.out, l.in, x, steps, y);
    codec::add_bias_rows(y, (*weights_)(l.bias), steps, l.out, blas_.stream());
}

void CudaCodecLayers::causal_conv(const fc::Conv& conv, RowHistory& history, const float* x, int64_t steps,
                                   DeviceBuffer& out) {
    require(steps % conv.stride == 0, "causal conv: ", steps, " steps is not a multiple of the stride ", conv.stride);
    const auto stream = blas_.stream();
    const int64_t out_steps = steps / conv.stride, window = conv.kernel * conv.in;
    // The conv is one product over gathered windows (a kernel-1, stride-1 conv reads x as it is).
    const float* windows = x;
    if (conv.kernel != 1 || conv.stride != 1) {
        float* gathered = grown(gathered_, out_steps * window);
        codec::gather_windows(history.rows.as<float>(), history.context, x, conv.in, out_steps, conv.kernel,
                              conv.dilation, conv.stride, gathered, stream);
        windows = gathered;
    }
    float* y = grown(out, out_steps * conv.out);
    blas_.product((*weights_)(conv.weight), conv.out, window, windows, out_steps, y);
    codec::add_bias_rows(y, (*weights_)(conv.bias), out_steps, conv.out, stream);
    if (history.context > 0) {
        codec::keep_last_rows(history.rows.as<float>(), history.context, x, steps, history.width,
                              history.next.as<float>(), stream);
        std::swap(history.rows, history.next);
    }
}

void CudaCodecLayers::conv_transpose(const fc::ConvTranspose& conv, Overlap& overlap, const float* x, int64_t steps,
                                      DeviceBuffer& out) {
    const auto stream = blas_.stream();
    const int64_t taps = conv.kernel * conv.out, s = conv.stride;
    const bool overlaps = conv.kernel == 2 * s;
    float* products = grown(gathered_, steps * taps);
    blas_.product((*weights_)(conv.weight), taps, conv.in, x, steps, products);
    codec::overlap_add(products, steps, s, conv.out, (*weights_)(conv.bias),
                       overlaps ? overlap.taps.as<float>() : nullptr, grown(out, steps * s * conv.out), stream);
    if (overlaps)
        DUET_CUDA_CHECK(cudaMemcpyAsync(overlap.taps.data(), products + (steps - 1) * taps + s * conv.out,
                                        static_cast<size_t>(s * conv.out) * sizeof(float), cudaMemcpyDeviceToDevice,
                                        stream));
}

void CudaCodecLayers::snake(const fc::Snake& s, float* x, int64_t steps) {
    codec::snake(x, (*weights_)(s.alpha), (*weights_)(s.inv_alpha), steps, static_cast<int64_t>(s.alpha.size()),
                 blas_.stream());
}

void CudaCodecLayers::residual_unit(const fc::ResidualUnit& unit, ResidualUnitState& state, int64_t steps) {
    const auto stream = blas_.stream();
    const int64_t count = steps * unit.conv1.in;
    float* y = grown(y_, count);
    DUET_CUDA_CHECK(cudaMemcpyAsync(y, x_.data(), static_cast<size_t>(count) * sizeof(float),
                                    cudaMemcpyDeviceToDevice, stream));
    snake(unit.snake1, y, steps);
    causal_conv(unit.conv1, state.conv1, y, steps, z_);
    snake(unit.snake2, z_.as<float>(), steps);
    causal_conv(unit.conv2, state.conv2, z_.as<float>(), steps, y_);
    codec::add_scaled_rows(x_.as<float>(), nullptr, y_.as<float>(), steps, unit.conv2.out, stream);
}

void CudaCodecLayers::convnext(const fc::ConvNeXt& block, RowHistory& history, int64_t steps) {
    const auto stream = blas_.stream();
    const int64_t channels = block.dwconv.channels;
    float* y = grown(y_, steps * channels);
    codec::depthwise_causal_conv(history.rows.as<float>(), x_.as<float>(), steps, channels, block.dwconv.kernel,
                                 (*weights_)(block.dwconv.weight), (*weights_)(block.dwconv.bias), y, stream);
    codec::keep_last_rows(history.rows.as<float>(), history.context, x_.as<float>(), steps, channels,
                          history.next.as<float>(), stream);
    std::swap(history.rows, history.next);
    // LayerNorm eps as the CPU's ConvNeXt (1e-6).
    codec::layer_norm_rows(y, (*weights_)(block.norm_weight), (*weights_)(block.norm_bias), steps, channels, 1e-6f,
                           stream);
    linear(block.pwconv1, y, steps, hidden_);
    codec::gelu(hidden_.as<float>(), steps * block.pwconv1.out, stream);
    linear(block.pwconv2, hidden_.as<float>(), steps, z_);
    codec::add_scaled_rows(x_.as<float>(), (*weights_)(block.gamma), z_.as<float>(), steps, channels, stream);
}

void CudaCodecLayers::keep_window(WindowCache& cache, const float* qkv, int64_t steps, int64_t width,
                                   int64_t window) {
    const auto stream = blas_.stream();
    const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
    // Room for the kept rows and this chunk's; a larger store keeps the kept rows.
    if (cache.capacity < cache.kept + steps) {
        const int64_t capacity = window - 1 + std::max<int64_t>(steps, 16);
        for (DeviceBuffer* store : {&cache.keys, &cache.values}) {
            DeviceBuffer larger(static_cast<size_t>(capacity) * row_bytes);
            if (cache.kept > 0)
                DUET_CUDA_CHECK(cudaMemcpyAsync(larger.data(), store->data(), static_cast<size_t>(cache.kept) * row_bytes,
                                                cudaMemcpyDeviceToDevice, stream));
            DUET_CUDA_CHECK(cudaStreamSynchronize(stream));
            *store = std::move(larger);
        }
        cache.moving = DeviceBuffer(static_cast<size_t>(window) * row_bytes);
        cache.capacity = capacity;
    }
    // This chunk's keys and values after the kept ones: qkv rows are [q | k | v].
    for (int part = 1; part <= 2; ++part) {
        DeviceBuffer& store = part == 1 ? cache.keys : cache.values;
        DUET_CUDA_CHECK(cudaMemcpy2DAsync(store.as<float>() + cache.kept * width, row_bytes, qkv + part * width,
                                          3 * row_bytes, row_bytes, static_cast<size_t>(steps),
                                          cudaMemcpyDeviceToDevice, stream));
    }
}

void CudaCodecLayers::transformer(const fc::Transformer& t, TransformerState& state, int64_t steps) {
    const auto stream = blas_.stream();
    const fc::TransformerConfig& c = t.config;
    const int64_t dim = c.dim, width = c.attn_width(), half = c.head_dim / 2;

    // The cos and sin tables, made on the host and copied without waiting: an asynchronous copy may
    // read its source after the call returns, so the tables live in the state, which is written again
    // only in the transformer's next chunk (once the chunk before has been waited for).
    state.rope_host.resize(static_cast<size_t>(2 * steps * half));
    float* cos = state.rope_host.data();
    float* sin = cos + steps * half;
    for (int64_t s = 0; s < steps; ++s)
        fc::rope_table_bf16(state.position + s, c.head_dim, c.rope_base, cos + s * half, sin + s * half);
    float* rope = grown(rope_, 2 * steps * half);
    DUET_CUDA_CHECK(cudaMemcpyAsync(rope, state.rope_host.data(), state.rope_host.size() * sizeof(float), cudaMemcpyHostToDevice,
                                    stream));

    float* normed = grown(y_, steps * dim);
    for (size_t l = 0; l < t.layers.size(); ++l) {
        const fc::TransformerLayer& layer = t.layers[l];
        WindowCache& cache = state.caches[l];
        codec::rms_norm_rows(x_.as<float>(), (*weights_)(layer.attention_norm), steps, dim, c.norm_eps, normed, stream);
        linear(layer.wqkv, normed, steps, z_);
        float* qkv = z_.as<float>();
        codec::rotate_pairs(qkv, steps, 3 * width, 2 * c.n_head, c.head_dim, rope, rope + steps * half, stream);

        keep_window(cache, qkv, steps, width, c.window);
        const int64_t total = cache.kept + steps;
        codec::windowed_attention(qkv, 3 * width, cache.keys.as<float>(), cache.values.as<float>(), total, steps,
                                  c.n_head, c.head_dim, c.window, grown(attended_, steps * width), stream);
        // Only the last window - 1 positions are seen again.
        const int64_t keep = std::min(total, c.window - 1), dropped = total - keep;
        if (dropped > 0 && keep > 0) {
            const size_t bytes = static_cast<size_t>(keep * width) * sizeof(float);
            for (DeviceBuffer* store : {&cache.keys, &cache.values}) {
                DUET_CUDA_CHECK(cudaMemcpyAsync(cache.moving.data(), store->as<float>() + dropped * width, bytes,
                                                cudaMemcpyDeviceToDevice, stream));
                DUET_CUDA_CHECK(
                    cudaMemcpyAsync(store->data(), cache.moving.data(), bytes, cudaMemcpyDeviceToDevice, stream));
            }
        }
        cache.kept = keep;

        linear(layer.wo, attended_.as<float>(), steps, z_);
        codec::add_scaled_rows(x_.as<float>(), (*weights_)(layer.attention_scale), z_.as<float>(), steps, dim, stream);

        codec::rms_norm_rows(x_.as<float>(), (*weights_)(layer.ffn_norm), steps, dim, c.norm_eps, normed, stream);
        linear(layer.w1, normed, steps, hidden_);
        linear(layer.w3, normed, steps, up_);
        codec::silu_mul(hidden_.as<float>(), up_.as<float>(), steps * c.intermediate, stream);
        linear(layer.w2, hidden_.as<float>(), steps, z_);
        codec::add_scaled_rows(x_.as<float>(), (*weights_)(layer.ffn_scale), z_.as<float>(), steps, dim, stream);
    }
    codec::rms_norm_rows(x_.as<float>(), (*weights_)(t.norm), steps, dim, c.norm_eps, normed, stream);
    std::swap(x_, y_);
    state.position += steps;
}

}  // namespace duet::cuda
