// Sound file reading and writing (libsndfile) and resampling (soxr).
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "audio/resample.h"
#include "audio/speech_input.h"
#include "io/audio_file.h"
#include "io/safetensors.h"
#include "test_support.h"

namespace duet {
namespace {

using testing::error_of;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

std::vector<float> sine(double freq, int rate, size_t n, float amplitude = 0.5f) {
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i)
        out[i] = amplitude * static_cast<float>(std::sin(2.0 * std::numbers::pi * freq * static_cast<double>(i) / rate));
    return out;
}

// The frequency of a clean sine from its zero crossings (upward), over the middle of the signal.
double zero_crossing_frequency(const std::vector<float>& x, int rate) {
    const size_t begin = x.size() / 10, end = x.size() - x.size() / 10;
    double first = -1, last = -1;
    int crossings = 0;
    for (size_t i = begin; i + 1 < end; ++i) {
        if (x[i] <= 0.0f && x[i + 1] > 0.0f) {
            const double at = static_cast<double>(i) + x[i] / (x[i] - x[i + 1]);
            if (first < 0) first = at;
            last = at;
            ++crossings;
        }
    }
    return crossings > 1 ? (crossings - 1) * rate / (last - first) : 0.0;
}

TEST(AudioFile, Pcm16WavRoundTrip) {
    TempDir dir("audio");
    const auto x = sine(440.0, 16000, 1600);
    write_wav(dir.file("a.wav"), x.data(), x.size(), 16000, WavSampleFormat::Pcm16);
    const AudioClip clip = read_audio_file(dir.file("a.wav"));
    EXPECT_EQ(clip.channels, 1);
    EXPECT_EQ(clip.sample_rate, 16000);
    ASSERT_EQ(clip.samples.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(clip.samples[i], x[i], 1.0 / 32768 + 1e-7);
}

TEST(AudioFile, FloatWavRoundTripIsExactAndPcm16Clips) {
    TempDir dir("audio");
    const std::vector<float> x = {0.0f, 0.25f, -0.75f, 1.5f, -2.0f, 1e-6f};
    write_wav(dir.file("f.wav"), x.data(), x.size(), 44100, WavSampleFormat::Float32);
    const AudioClip clip = read_audio_file(dir.file("f.wav"));
    EXPECT_EQ(clip.sample_rate, 44100);
    EXPECT_EQ(clip.samples, x);

    write_wav(dir.file("i.wav"), x.data(), x.size(), 44100, WavSampleFormat::Pcm16);
    const AudioClip clipped = read_audio_file(dir.file("i.wav"));
    ASSERT_EQ(clipped.samples.size(), x.size());
    EXPECT_NEAR(clipped.samples[3], 1.0f, 1e-4);
    EXPECT_NEAR(clipped.samples[4], -1.0f, 1e-4);
}

TEST(AudioFile, StreamingWriterEqualsWholeWrite) {
    TempDir dir("audio");
    const auto x = sine(1000.0, 44100, 5000);
    {
        WavWriter writer(dir.file("s.wav"), 44100, WavSampleFormat::Pcm16);
        writer.append(x.data(), 7);
        writer.append(x.data() + 7, 993);
        writer.append(x.data() + 1000, 4000);
        EXPECT_EQ(writer.samples_written(), 5000);
        writer.close();
        EXPECT_NE(error_of([&] { writer.append(x.data(), 1); }).find("closed"), std::string::npos);
    }
    write_wav(dir.file("w.wav"), x.data(), x.size(), 44100, WavSampleFormat::Pcm16);
    EXPECT_EQ(read_bytes(dir.file("s.wav")), read_bytes(dir.file("w.wav")));
}

TEST(AudioFile, DownmixAveragesChannels) {
    AudioClip clip;
    clip.channels = 2;
    clip.sample_rate = 8000;
    clip.samples = {1.0f, 0.0f, 0.5f, -0.5f, -1.0f, -0.5f};
    EXPECT_EQ(downmix_to_mono(clip), (std::vector<float>{0.5f, 0.0f, -0.75f}));
}

TEST(AudioFile, GarbageAndTruncatedFilesNameThePath) {
    TempDir dir("audio");
    write_bytes(dir.file("garbage.wav"), std::string(300, 'x'));
    std::string message = error_of([&] { read_audio_file(dir.file("garbage.wav")); });
    EXPECT_NE(message.find(dir.file("garbage.wav")), std::string::npos) << message;

    EXPECT_NE(error_of([&] { read_audio_file(dir.file("missing.wav")); }).find("missing.wav"), std::string::npos);

    const auto x = sine(440.0, 16000, 1000);
    write_wav(dir.file("whole.wav"), x.data(), x.size(), 16000, WavSampleFormat::Pcm16);
    const std::string whole = read_bytes(dir.file("whole.wav"));
    // Only the header: no samples at all.
    write_bytes(dir.file("header_only.wav"), whole.substr(0, 44));
    message = error_of([&] { read_audio_file(dir.file("header_only.wav")); });
    EXPECT_NE(message.find("header_only.wav"), std::string::npos) << message;
    // Cut inside the RIFF header.
    write_bytes(dir.file("cut.wav"), whole.substr(0, 20));
    message = error_of([&] { read_audio_file(dir.file("cut.wav")); });
    EXPECT_NE(message.find("cut.wav"), std::string::npos) << message;
}

// A float file can hold NaN and infinities, which no model can take as sound.
TEST(AudioFile, NonFiniteSamplesAreRefusedByIndex) {
    TempDir dir("audio");
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()}) {
        std::vector<float> x = sine(440.0, 16000, 1000);
        x[321] = bad;
        write_wav(dir.file("bad.wav"), x.data(), x.size(), 16000, WavSampleFormat::Float32);
        const std::string message = error_of([&] { read_audio_file(dir.file("bad.wav")); });
        EXPECT_NE(message.find(dir.file("bad.wav") + ": sample 321 is "), std::string::npos) << message;
        EXPECT_NE(message.find("expected finite audio samples"), std::string::npos) << message;

        const TensorToWrite wave{"waveform", DType::F32, {static_cast<int64_t>(x.size())}, x.data(),
                                 x.size() * sizeof(float)};
        write_safetensors(dir.file("bad.safetensors"), {wave});
        const std::string from_tensor =
            error_of([&] { audio::read_speech_input(dir.file("bad.safetensors"), 16000); });
        EXPECT_NE(from_tensor.find("'waveform': sample 321 is "), std::string::npos) << from_tensor;
    }
    // Finite samples, however loud, are audio.
    const std::vector<float> loud = {0.0f, 5.0f, -7.5f, 1e6f};
    write_wav(dir.file("loud.wav"), loud.data(), loud.size(), 16000, WavSampleFormat::Float32);
    EXPECT_EQ(read_audio_file(dir.file("loud.wav")).samples, loud);
}

TEST(Resample, SineKeepsItsFrequencyAndScalesLength) {
    const int from = 48000, to = 44100;
    const auto x = sine(1000.0, from, 48000);
    const auto y = resample(x, from, to);
    EXPECT_EQ(y.size(), 44100u);
    EXPECT_NEAR(zero_crossing_frequency(y, to), 1000.0, 0.5);
    // Aligned with the input: the resampled sine still starts at phase zero.
    const auto expected = sine(1000.0, to, y.size());
    EXPECT_LT(testing::max_abs_difference(y.data() + 1000, expected.data() + 1000, y.size() - 2000), 1e-3);

    const auto up = resample(sine(440.0, 16000, 16000), 16000, 44100);
    EXPECT_EQ(up.size(), 44100u);
    EXPECT_NEAR(zero_crossing_frequency(up, 44100), 440.0, 0.5);
}

TEST(Resample, EqualRatesAreIdentity) {
    const auto x = sine(300.0, 22050, 777);
    EXPECT_EQ(resample(x, 22050, 22050), x);
    EXPECT_FALSE(error_of([&] { resample(x, 0, 22050); }).empty());
}

}  // namespace
}  // namespace duet
