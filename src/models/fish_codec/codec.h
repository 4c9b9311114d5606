// Fish's modded DAC codec (S2 Pro, Drama 3) on the CPU: code frames → 44.1 kHz waveform (decode,
// whole or streamed in chunks) and waveform → code frames (encode, for voice cloning).
//
// Codes are 1 + n_codebooks per frame: the semantic code, then the residual ones. A frame is
// samples_per_frame() samples (2048 in the real codec).
//
//   FishCodec codec = FishCodec::load("path/to/codec_dir");
//   std::vector<float> audio = codec.decode(codes, frames, &pool);        // codes [codebooks, frames]
//   StreamingDecoder stream(codec, &pool);
//   for each chunk of frames: writer.append(stream.push(chunk_frame_major));  // chunk [k, codebooks]
//
// Streamed output concatenated equals the whole decode (every layer keeps its causal past).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "models/fish_codec/config.h"
#include "models/fish_codec/layers.h"
#include "models/fish_codec/weights.h"
#include "models/weight_binder.h"

namespace duet::fish_codec {

class FishCodec {
public:
    // Whole decodes and encodes run as streams in chunks of this many frames, which bounds the
    // activations' memory (the result is the same: chunked and whole runs agree to the bit). Measured
    // on two cores with the real codec: chunks of 8 frames decode about twice as fast as chunks of
    // 32, whose last blocks' activations (tens of MB each) come fresh from the kernel on every call
    // and fault in page by page.
    static constexpr int64_t kDecodeChunkFrames = 8;

    // `path`: a directory holding codec.pth (preferred) or codec.safetensors, or one of those files.
    // The config is codec_config.json beside the weights when present, else the real codec's.
    static FishCodec load(const std::string& path);
    static FishCodec from_lookup(const Config& config, const TensorLookup& lookup, const std::string& source);
    // Deterministic random weights (benchmarks, the demo); the output is noise.
    static FishCodec random(const Config& config, uint64_t seed, ThreadPool* pool);

    const Config& config() const { return *config_; }
    int64_t codebooks() const { return 1 + config_->n_codebooks; }
    int64_t samples_per_frame() const { return config_->samples_per_frame(); }
    int sample_rate() const { return static_cast<int>(config_->sample_rate); }

    // codes: [codebooks(), frames] row-major, as `duet codec` files hold them. Returns
    // frames · samples_per_frame() samples in [-1, 1]. Codes above a codebook's size are clamped (as
    // fish-speech does); negative codes are an error.
    std::vector<float> decode(std::span<const int32_t> codes, int64_t frames, ThreadPool* pool) const;

    // Mono samples at sample_rate(), padded with zeros to whole frames. Returns [codebooks(), frames].
    // Runs as a stream in chunks of `chunk_frames` frames (0: the default), each layer keeping its
    // causal past: the codes do not depend on the chunk.
    std::vector<int32_t> encode(std::span<const float> samples, ThreadPool* pool, int64_t chunk_frames = 0) const;

    // The weights as loaded (f32, laid out for the CPU layers), for decoders on other devices.
    const std::shared_ptr<const Weights>& weights() const { return weights_; }

private:
    friend class StreamingDecoder;
    std::shared_ptr<const Config> config_;
    std::shared_ptr<const Weights> weights_;
};

// Turns code frames into samples chunk by chunk, keeping every causal layer's past between chunks,
// so that the concatenated output does not depend on how the frames were split. One per audio
// stream. StreamingDecoder runs on the CPU; the CUDA part has one on the GPU.
class FrameDecoder {
public:
    virtual ~FrameDecoder() = default;
    // frame_major: k frames of codebooks() codes each ([k, codebooks]); returns their
    // k · samples_per_frame() new samples.
    virtual std::vector<float> push(std::span<const int32_t> frame_major) = 0;
    virtual int64_t frames_decoded() const = 0;
};

class StreamingDecoder final : public FrameDecoder {
public:
    // Keeps the codec's weights alive; one decoder per audio stream.
    explicit StreamingDecoder(const FishCodec& codec, ThreadPool* pool = nullptr);

    std::vector<float> push(std::span<const int32_t> frame_major) override;
    int64_t frames_decoded() const override { return frames_; }

private:
    std::shared_ptr<const Config> config_;
    std::shared_ptr<const Weights> weights_;
    ThreadPool* pool_;
    int64_t frames_ = 0;

    TransformerState post_module_;
    std::vector<ConvTransposeState> upsample_;
    std::vector<ConvNeXtState> upsample_blocks_;
    ConvState decoder_in_;
    std::vector<ConvTransposeState> block_upsample_;
    std::vector<std::array<ResidualUnitState, 3>> block_units_;
    ConvState decoder_out_;
};

// codes [codebooks, frames] through `decoder` in chunks of `chunk_frames` frames: the whole decode.
std::vector<float> decode_in_chunks(FrameDecoder& decoder, std::span<const int32_t> codes, int64_t codebooks,
                                    int64_t frames, int64_t chunk_frames);

// Checks a chunk of frame-major codes before any decoder reads it: whole frames of `codebooks`
// codes, none negative (`first_frame` numbers the chunk's frames in errors).
void check_frame_codes(std::span<const int32_t> frame_major, int64_t codebooks, int64_t first_frame);

// [codebooks, frames] ↔ [frames, codebooks].
std::vector<int32_t> to_frame_major(std::span<const int32_t> codes, int64_t codebooks, int64_t frames);

}  // namespace duet::fish_codec
