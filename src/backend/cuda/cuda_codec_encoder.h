// The Fish codec's encoder (44.1 kHz samples → code frames, for voice cloning) on the GPU: the layers
// and quantizers of fish_codec::FishCodec::encode (cuda_codec_layers.h), chunk by chunk with the same
// causal state. Each quantizer picks its nearest code from f32 sums taken in another order than the
// CPU's, so where a frame's two best codes lie within rounding of each other the choice (and the
// residual codes after it) may differ from the CPU's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/cuda_codec_layers.h"
#include "models/fish_codec/codec.h"

namespace duet::cuda {

class CudaCodecEncoder final : private CudaCodecLayers {
public:
    // `codec` must outlive the encoder (its weights are read for shapes).
    explicit CudaCodecEncoder(const fish_codec::FishCodec& codec);

    // Mono samples at the codec's rate, padded with zeros to whole frames: [codebooks, frames], as
    // FishCodec::encode returns them. Chunks of `chunk_frames` frames (0: kChunkFrames).
    std::vector<int32_t> encode(std::span<const float> samples, int64_t chunk_frames = 0);

    // Frames a chunk: the activations of the first layers (64 channels at the sample rate, seven taps
    // gathered) then take about 250 MB.
    static constexpr int64_t kChunkFrames = 64;

private:
    // The latent of the chunk of samples in x_ ([steps, 1]); returns its frames.
    int64_t encode_latent(int64_t steps);
    // Quantizer `book`: codes_[t · books + book] for the latent in x_, its projection taken from x_.
    void quantize(const fish_codec::Codebook& cb, int64_t book, int64_t frames);

    int64_t samples_per_frame_, books_;
    RowHistory in_, out_;
    std::vector<std::array<ResidualUnitState, 3>> units_;
    std::vector<RowHistory> block_downsample_;
    std::vector<TransformerState> block_transformer_;
    std::vector<RowHistory> down_, down_blocks_;
    TransformerState pre_;
    std::vector<DeviceBuffer> code_squares_;  // fish_codec::code_squares of each codebook
    DeviceBuffer projected_, codes_;
};

}  // namespace duet::cuda
