#include "io/audio_file.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace duet {

namespace {

// Closes a SNDFILE on every path out of a function.
struct SndfileCloser {
    SNDFILE* file;
    ~SndfileCloser() {
        if (file) sf_close(file);
    }
};

int sndfile_format(WavSampleFormat format) {
    return SF_FORMAT_WAV | (format == WavSampleFormat::Pcm16 ? SF_FORMAT_PCM_16 : SF_FORMAT_FLOAT);
}

SNDFILE* open_for_writing(const std::string& path, int sample_rate, WavSampleFormat format) {
    require(sample_rate > 0, path, ": cannot write audio at sample rate ", sample_rate);
    SF_INFO info{};
    info.samplerate = sample_rate;
    info.channels = 1;
    info.format = sndfile_format(format);
    SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
    require(file != nullptr, path, ": cannot open for writing audio: ", sf_strerror(nullptr));
    // Float input outside [-1, 1] is clipped when written as integers instead of wrapping round.
    sf_command(file, SFC_SET_CLIPPING, nullptr, SF_TRUE);
    return file;
}

void write_all(SNDFILE* file, const std::string& path, const float* mono, size_t n) {
    const sf_count_t done = sf_write_float(file, mono, static_cast<sf_count_t>(n));
    require(done == static_cast<sf_count_t>(n), path, ": wrote ", done, " of ", n,
            " samples: ", sf_strerror(file));
}

}  // namespace

AudioClip read_audio_file(const std::string& path) {
    SF_INFO info{};
    SndfileCloser file{sf_open(path.c_str(), SFM_READ, &info)};
    require(file.file != nullptr, path, ": cannot read as audio: ", sf_strerror(nullptr));
    require(info.channels >= 1 && info.channels <= kMaxAudioChannels, path, ": ", info.channels,
            " channels, expected 1 to ", kMaxAudioChannels);
    require(info.samplerate >= 1000 && info.samplerate <= 768000, path, ": sample rate ", info.samplerate,
            " Hz, expected 1000 to 768000");
    require(info.frames > 0, path, ": no audio samples");
    require(info.frames <= kMaxAudioFrames, path, ": header claims ", info.frames, " frames, more than the ",
            kMaxAudioFrames, " accepted");

    AudioClip clip;
    clip.channels = info.channels;
    clip.sample_rate = info.samplerate;
    clip.samples.resize(static_cast<size_t>(info.frames) * static_cast<size_t>(info.channels));
    const sf_count_t got = sf_readf_float(file.file, clip.samples.data(), info.frames);
    // A file cut short reads fewer frames than its header claims: keep what is there, but nothing is
    // not audio.
    require(got > 0, path, ": no audio samples could be read: ", sf_strerror(file.file));
    clip.samples.resize(static_cast<size_t>(got) * static_cast<size_t>(info.channels));
    require_finite_samples(path, clip.samples.data(), clip.samples.size());
    return clip;
}

void require_finite_samples(const std::string& what, const float* samples, size_t count) {
    const float* bad = std::find_if(samples, samples + count, [](float s) { return !std::isfinite(s); });
    if (bad != samples + count) fail(what, ": sample ", bad - samples, " is ", *bad, ", expected finite audio samples");
}

std::vector<float> downmix_to_mono(const AudioClip& clip) {
    if (clip.channels == 1) return clip.samples;
    const int64_t frames = clip.frames();
    std::vector<float> mono(static_cast<size_t>(frames));
    const float scale = 1.0f / static_cast<float>(clip.channels);
    for (int64_t f = 0; f < frames; ++f) {
        float sum = 0.0f;
        for (int c = 0; c < clip.channels; ++c) sum += clip.samples[static_cast<size_t>(f * clip.channels + c)];
        mono[static_cast<size_t>(f)] = sum * scale;
    }
    return mono;
}

void write_wav(const std::string& path, const float* mono, size_t n, int sample_rate, WavSampleFormat format) {
    SndfileCloser file{open_for_writing(path, sample_rate, format)};
    write_all(file.file, path, mono, n);
    const int rc = sf_close(file.file);
    file.file = nullptr;
    require(rc == 0, path, ": cannot finish writing audio: ", sf_error_number(rc));
}

WavWriter::WavWriter(const std::string& path, int sample_rate, WavSampleFormat format)
    : path_(path), file_(open_for_writing(path, sample_rate, format)), format_(format) {}

WavWriter::~WavWriter() {
    if (file_) sf_close(static_cast<SNDFILE*>(file_));
}

void WavWriter::append(const float* mono, size_t n) {
    require(file_ != nullptr, path_, ": audio appended after the file was closed");
    write_all(static_cast<SNDFILE*>(file_), path_, mono, n);
    written_ += static_cast<int64_t>(n);
}

void WavWriter::close() {
    if (!file_) return;
    const int rc = sf_close(static_cast<SNDFILE*>(file_));
    file_ = nullptr;
    require(rc == 0, path_, ": cannot finish writing audio: ", sf_error_number(rc));
}

}  // namespace duet
