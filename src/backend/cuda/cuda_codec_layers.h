// The Fish codec's layers on the GPU, shared by its GPU decoder and encoder: the same layers, in the
// same order and on the same f32 weights as the CPU's (models/fish_codec/layers.h), with every product
// in cuBLAS (f32, no TF32) and the rest in kernels/cuda/codec_kernels. Results agree with the CPU's up
// to the order of f32 sums. A stream of audio keeps its causal past on the device and runs on a CUDA
// stream of its own.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/cuda/f32_products.h"
#include "kernels/cuda/device_buffer.h"
#include "models/fish_codec/codec.h"

namespace duet::cuda {

// One half of a codec's weights (the decoder's, or the encoder's and its quantizers'), copied to the
// device; looked up by the host array they came from, so a GPU stream walks the host's layer structs
// for shapes and finds each array's copy here.
class CudaCodecWeights {
public:
    enum class Half { decoder, encoder };
    explicit CudaCodecWeights(const fish_codec::FishCodec& codec, Half half = Half::decoder);

    const fish_codec::Config& config() const { return *config_; }
    const fish_codec::Weights& host() const { return *host_; }
    // The device copy of a host array uploaded at construction; null for an empty one (an absent bias).
    const float* operator()(const std::vector<float>& host) const { return find(host.data(), host.size()); }
    const float* operator()(const fish_codec::MatrixWeights& host) const { return find(host.data(), host.size()); }

private:
    const float* find(const float* host, size_t count) const;
    void upload(const float* host, size_t count);
    template <typename Layer>
    void upload_layer(const Layer& layer);

    std::shared_ptr<const fish_codec::Config> config_;
    std::shared_ptr<const fish_codec::Weights> host_;
    std::unordered_map<const float*, DeviceBuffer> device_;
};

// The layer ops of one stream, each on the running signal x_ or into a buffer it is given, and the
// causal state each keeps between chunks (zeroed at the start).
class CudaCodecLayers {
protected:
    explicit CudaCodecLayers(std::shared_ptr<const CudaCodecWeights> weights);

    // The last rows a causal conv (or depthwise conv) has seen, zeros before the start.
    struct RowHistory {
        int64_t context = 0, width = 0;
        DeviceBuffer rows, next;
    };
    // A transposed conv's taps of the last step that land on the next steps' outputs.
    struct Overlap {
        DeviceBuffer taps;
    };
    // One transformer layer's keys and values of the last window - 1 positions, RoPE applied.
    struct WindowCache {
        int64_t kept = 0, capacity = 0;
        DeviceBuffer keys, values, moving;
    };
    struct ResidualUnitState {
        RowHistory conv1, conv2;
    };
    // A transformer's layers' windows and the absolute position of its next step.
    struct TransformerState {
        std::vector<WindowCache> caches;
        int64_t position = 0;
        std::vector<float> rope_host;  // the source of the RoPE tables' copy, alive until the stream waits
    };
    TransformerState zero_transformer(const fish_codec::Transformer& t) const;
    ResidualUnitState zero_unit(const fish_codec::ResidualUnit& unit);

    // Zeroed on this stream's own CUDA stream, which every later use of the state follows.
    RowHistory zero_history(int64_t context, int64_t width);
    // A causal conv's past (its context() input rows) and a ConvNeXt block's depthwise conv's.
    RowHistory zero_history(const fish_codec::Conv& conv) { return zero_history(conv.context(), conv.in); }
    RowHistory zero_history(const fish_codec::ConvNeXt& block) {
        return zero_history(block.dwconv.kernel - 1, block.dwconv.channels);
    }
    Overlap zero_overlap(const fish_codec::ConvTranspose& conv);

    // Each op reads `x` and writes its result into `out` (grown as needed), as its CPU namesake.
    void linear(const fish_codec::Linear& l, const float* x, int64_t steps, DeviceBuffer& out);
    void causal_conv(const fish_codec::Conv& conv, RowHistory& history, const float* x, int64_t steps,
                     DeviceBuffer& out);
    void conv_transpose(const fish_codec::ConvTranspose& conv, Overlap& overlap, const float* x, int64_t steps,
                        DeviceBuffer& out);
    void snake(const fish_codec::Snake& s, float* x, int64_t steps);
    // These update x_ in place.
    void residual_unit(const fish_codec::ResidualUnit& unit, ResidualUnitState& state, int64_t steps);
    void convnext(const fish_codec::ConvNeXt& block, RowHistory& history, int64_t steps);
    void transformer(const fish_codec::Transformer& t, TransformerState& state, int64_t steps);
    void keep_window(WindowCache& cache, const float* qkv, int64_t steps, int64_t width, int64_t window);

    std::shared_ptr<const CudaCodecWeights> weights_;
    F32Products blas_;
    // x_ is the running signal; the others are scratch, grown to the largest chunk.
    DeviceBuffer x_, y_, z_, gathered_, hidden_, up_, attended_, rope_;
};

}  // namespace duet::cuda
