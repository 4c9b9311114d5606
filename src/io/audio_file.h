// Sound files through libsndfile: reading WAV, FLAC, OGG (and whatever else the library knows) into
// f32 samples, and writing mono WAV as 16-bit PCM or 32-bit float, whole or as a stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace duet {

struct AudioClip {
    std::vector<float> samples;  // interleaved, channels values per frame, nominally in [-1, 1]
    int channels = 0;
    int sample_rate = 0;

    int64_t frames() const { return channels > 0 ? static_cast<int64_t>(samples.size()) / channels : 0; }
};

// The longest clip read_audio_file accepts: a header claiming more is refused before anything is
// allocated (4 hours at 48 kHz, far beyond any voice prompt, and below 2^31 samples).
constexpr int64_t kMaxAudioFrames = int64_t{4} * 3600 * 48000;
constexpr int kMaxAudioChannels = 16;

// Errors name the path: unreadable or unknown format, no samples, absurd rate/channels/length, a
// sample that is NaN or infinite (a float file can hold them; no model output would mean anything).
AudioClip read_audio_file(const std::string& path);

// Throws, naming `what` and the first offending sample, unless every sample is finite.
void require_finite_samples(const std::string& what, const float* samples, size_t count);

// The mean of the channels of each frame.
std::vector<float> downmix_to_mono(const AudioClip& clip);

enum class WavSampleFormat { Pcm16, Float32 };

// Writes mono samples as a WAV file. Pcm16 clips to [-1, 1] first.
void write_wav(const std::string& path, const float* mono, size_t n, int sample_rate,
               WavSampleFormat format = WavSampleFormat::Pcm16);

// A mono WAV file written as samples arrive (streaming decode): the header is completed by close(),
// which the destructor calls too.
class WavWriter {
public:
    WavWriter(const std::string& path, int sample_rate, WavSampleFormat format = WavSampleFormat::Pcm16);
    ~WavWriter();
    WavWriter(const WavWriter&) = delete;
    WavWriter& operator=(const WavWriter&) = delete;

    void append(const float* mono, size_t n);
    // Finalises the header and closes the file; further appends are errors. Safe to call twice.
    void close();

    int64_t samples_written() const { return written_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    void* file_ = nullptr;  // SNDFILE*, kept out of this header
    WavSampleFormat format_;
    int64_t written_ = 0;
};

}  // namespace duet
