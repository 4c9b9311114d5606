// The Fish codec's decoder (code frames → 44.1 kHz samples) on the GPU: fish_codec::StreamingDecoder's
// layers (cuda_codec_layers.h). Each decoder keeps its stream's causal past on the device and runs on
// a CUDA stream of its own, so it can decode beside a model's decode steps.
//
//   auto weights = std::make_shared<const CudaCodecWeights>(codec);   // uploads once
//   CudaCodecDecoder stream(weights);                                  // one per audio stream
//   std::vector<float> samples = stream.push(frame_major_codes);
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/cuda_codec_layers.h"
#include "models/fish_codec/codec.h"

namespace duet::cuda {

class CudaCodecDecoder final : public fish_codec::FrameDecoder, private CudaCodecLayers {
public:
    explicit CudaCodecDecoder(std::shared_ptr<const CudaCodecWeights> weights);
    ~CudaCodecDecoder() override;
    CudaCodecDecoder(const CudaCodecDecoder&) = delete;
    CudaCodecDecoder& operator=(const CudaCodecDecoder&) = delete;

    std::vector<float> push(std::span<const int32_t> frame_major) override;
    int64_t frames_decoded() const override { return frames_; }

private:
    int64_t frames_ = 0;

    // Causal state, as StreamingDecoder keeps it.
    TransformerState post_module_;
    std::vector<Overlap> upsample_;
    std::vector<RowHistory> upsample_blocks_;
    RowHistory decoder_in_;
    std::vector<Overlap> block_upsample_;
    std::vector<std::array<ResidualUnitState, 3>> block_units_;
    RowHistory decoder_out_;

    DeviceBuffer codes_;
};

// The decoder for `codec` on the GPU, for code that sees only fish_codec::FrameDecoder.
std::unique_ptr<fish_codec::FrameDecoder> make_cuda_codec_decoder(const fish_codec::FishCodec& codec);

}  // namespace duet::cuda
