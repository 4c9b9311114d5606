// Code frames to a WAV file as they arrive: the codec's streaming decoder turns each chunk into
// samples (a small first chunk so audio starts early, then larger ones) and the samples are
// appended to the file, so a long text's audio never has to be held whole.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/audio_file.h"
#include "models/fish_codec/codec.h"

namespace duet::fish_codec {

class WavStream {
public:
    // Frames per chunk: the first, then every later one.
    static constexpr int64_t kFirstChunk = 4, kChunk = 16;

    WavStream(const FishCodec& codec, const std::string& path, ThreadPool* pool,
              WavSampleFormat format = WavSampleFormat::Pcm16);

    // One frame's codes (codebooks() values: the semantic code, then the residual ones).
    void add(std::span<const int32_t> codes);
    // Decodes what is pending and finalises the file.
    void finish();

    int64_t frames() const { return frames_; }
    int64_t samples() const { return writer_.samples_written(); }
    // Seconds from construction until the first samples reached the file (0 before that).
    double first_audio_seconds() const { return first_audio_s_; }

private:
    void flush();

    int64_t codebooks_;
    StreamingDecoder decoder_;
    WavWriter writer_;
    std::vector<int32_t> pending_;  // frame-major codes not decoded yet
    int64_t frames_ = 0;
    double first_audio_s_ = 0.0;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace duet::fish_codec
