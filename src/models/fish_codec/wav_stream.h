// Code frames to a WAV file as they arrive: the codec's streaming decoder turns each chunk into
// samples (a small first chunk so audio starts early, then larger ones) and the samples are
// appended to the file, so a long text's audio never has to be held whole.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "io/audio_file.h"
#include "models/fish_codec/codec.h"

namespace duet::fish_codec {

// Where a WavStream decodes: in the call that completes a chunk, or on a thread of its own while
// the caller goes on making frames. The second pays when the frames come from a GPU and the codec
// runs on the CPU: a text's time is then the slower of the two instead of their sum. Either way
// the chunks, and so the samples, are the same.
enum class Decoding { InCall, Background };

class WavStream {
public:
    // Frames per chunk: the first, then every later one.
    static constexpr int64_t kFirstChunk = 4, kChunk = 16;

    // Decodes with the codec on the CPU (StreamingDecoder on `pool`).
    WavStream(const FishCodec& codec, const std::string& path, ThreadPool* pool,
              WavSampleFormat format = WavSampleFormat::Pcm16, Decoding decoding = Decoding::InCall);
    // Decodes with `decoder`, a stream of `codec`'s frames on any device.
    WavStream(const FishCodec& codec, std::unique_ptr<FrameDecoder> decoder, const std::string& path,
              WavSampleFormat format = WavSampleFormat::Pcm16, Decoding decoding = Decoding::InCall);
    // Without finish(), a background decoder stops and what it had not decoded is dropped.
    ~WavStream();

    WavStream(const WavStream&) = delete;
    WavStream& operator=(const WavStream&) = delete;

    // One frame's codes (codebooks() values: the semantic code, then the residual ones). Throws the
    // background decoder's error, if it had one.
    void add(std::span<const int32_t> codes);
    // Decodes what is pending and finalises the file.
    void finish();

    int64_t frames() const { return frames_; }
    int64_t samples() const { return writer_.samples_written(); }
    // Seconds from construction until the first samples reached the file (0 before that).
    double first_audio_seconds() const { return first_audio_s_; }

private:
    // Frames in the next chunk: a small first one, then larger ones. Read only by whoever decodes.
    int64_t next_chunk_frames() const { return decoder_->frames_decoded() == 0 ? kFirstChunk : kChunk; }
    void decode(std::span<const int32_t> codes);
    void decode_in_background();
    void stop_background(bool drop_pending);

    int64_t codebooks_;
    std::unique_ptr<FrameDecoder> decoder_;
    WavWriter writer_;
    std::vector<int32_t> pending_;  // frame-major codes not decoded yet
    int64_t frames_ = 0;
    double first_audio_s_ = 0.0;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();

    // Background decoding: pending_ is shared with the thread under mutex_.
    std::thread worker_;
    std::mutex mutex_;
    std::condition_variable more_;
    bool finishing_ = false;
    bool dropping_ = false;
    std::exception_ptr error_;
};

}  // namespace duet::fish_codec
