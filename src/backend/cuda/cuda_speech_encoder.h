// Transcribe's speech encoders' layers (embed_norm, the Transformer layers, final_norm: what
// transcribe::encode_projected computes) on the GPU: the same steps on the same weights widened to
// f32, every product in cuBLAS (f32, no TF32), attention as two batched products around a softmax,
// the rest in kernels/cuda/speech_encoder_kernels and codec_kernels. Results agree with the CPU's up
// to the order of f32 sums. The products around the layers and the log-mel front end
// (kernels/cuda/log_mel_kernels, the CPU's arithmetic) run here too. Weights are copied to the device
// on first use and kept, found again by the host arrays they came from, so one object serves both
// encoders of a Perception.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cuda/f32_products.h"
#include "kernels/cuda/device_buffer.h"
#include "models/transcribe/speech_encoder.h"

namespace duet::cuda {

class CudaPerceptionDevice final : public transcribe::PerceptionDevice {
public:
    void run(const transcribe::EncoderConfig& config, const transcribe::EncoderWeights& weights, std::vector<float>& x,
             int64_t n, int64_t keys) override;
    void linear(const transcribe::LinearWeights& w, const float* x, int64_t n, float* out) override;
    audio::LogMelForms log_mel(const audio::LogMelFrontEnd& front_end, const std::vector<float>& waveform) override;

private:
    const float* matrix(const MatrixView& w);
    const float* vector(const std::vector<float>& v);  // null for an empty one (no bias)
    // y = x · Wᵀ + bias, then acc += y when acc is given (device arrays).
    void device_linear(const transcribe::LinearWeights& l, const float* x, int64_t n, float* y, float* acc = nullptr);
    // Every query row of qkv [n, 3 · width] over the first `keys` rows' keys and values, into out [n, width].
    void attention(const transcribe::EncoderConfig& c, const float* qkv, int64_t n, int64_t keys, float* out);
    void layer_norm(const transcribe::LayerNormWeights& norm, const float* x, int64_t n, int64_t width, float eps,
                    float* out);

    // A host array's device copy (f32), with what identifies the host array it was made from.
    struct DeviceCopy {
        DeviceBuffer buffer;
        size_t bytes = 0;
        std::array<uint8_t, 32> head{};
    };
    // The copy of `bytes` of host data at `host`, or null when there is none or the host address now
    // holds other data (a Perception freed and another made in its place); the stale copy goes.
    const float* existing(const void* host, size_t bytes);
    const float* keep(const void* host, size_t bytes, DeviceBuffer buffer);

    std::mutex mutex_;  // one run at a time: perceive() is const and may be called from several threads
    F32Products blas_;
    std::unordered_map<const void*, DeviceCopy> weights_;
    DeviceBuffer x_, normed_, qkv_, attended_, branch_, hidden_, scores_, cos_, sin_, product_in_, product_out_;
    DeviceBuffer samples_, mel_raw_, mel_normalized_;
};

std::shared_ptr<transcribe::PerceptionDevice> make_cuda_perception_device();

}  // namespace duet::cuda
