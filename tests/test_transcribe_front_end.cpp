// Transcribe's log-mel front end: the FFT against a plain DFT, the default window and filterbank
// against the checkpoint's, and the raw and normalised log-mel against NeMo's (fixture).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>

#include "audio/fft.h"
#include "audio/log_mel.h"
#include "audio/mel_filterbank.h"
#include "base/thread_pool.h"
#include "io/safetensors.h"
#include "kernel_test_support.h"
#include "test_support.h"

namespace duet {
namespace {

using testing::fixture_dir;
using testing::random_values;

std::vector<std::complex<double>> plain_dft(const std::vector<std::complex<double>>& x) {
    const auto n = static_cast<int64_t>(x.size());
    std::vector<std::complex<double>> out(x.size());
    for (int64_t k = 0; k < n; ++k) {
        std::complex<double> sum = 0.0;
        for (int64_t t = 0; t < n; ++t) {
            const double angle = -2.0 * std::numbers::pi * static_cast<double>(k * t % n) / static_cast<double>(n);
            sum += x[t] * std::complex<double>(std::cos(angle), std::sin(angle));
        }
        out[k] = sum;
    }
    return out;
}

TEST(TranscribeFrontEnd, FftEqualsPlainDft) {
    std::mt19937 rng(7);
    for (int64_t n : {2, 8, 64, 512}) {
        const std::vector<float> re = random_values(rng, n), im = random_values(rng, n);
        std::vector<std::complex<double>> x(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) x[i] = {re[i], im[i]};
        const std::vector<std::complex<double>> expected = plain_dft(x);
        audio::Fft(n).forward(x.data());
        EXPECT_LT(testing::max_abs_difference(x, expected), 1e-10) << "n = " << n;
    }
}

TEST(TranscribeFrontEnd, FftRejectsSizesThatAreNotPowersOfTwo) {
    EXPECT_NE(testing::error_of([] { audio::Fft(400); }).find("power of two"), std::string::npos);
}

// The whole front end with a plain DFT in place of the FFT, written from the NeMo definition.
std::vector<float> plain_dft_log_mel(const std::vector<float>& wave, const audio::MelSettings& s) {
    const std::vector<float> window = audio::symmetric_hann_window(s.win_length);
    const std::vector<float> fb = audio::slaney_mel_filterbank(s.sample_rate, s.n_fft, s.n_mels);
    const auto n = static_cast<int64_t>(wave.size());
    const int64_t valid = n / s.hop, frames = audio::padded_mel_frames(n, s.hop, s.pad_to);
    const int64_t bins = s.n_fft / 2 + 1, left = (s.n_fft - s.win_length) / 2;
    std::vector<float> out(static_cast<size_t>(frames * s.n_mels), 0.0f);
    for (int64_t t = 0; t < valid; ++t) {
        std::vector<std::complex<double>> frame(static_cast<size_t>(s.n_fft));
        for (int64_t i = 0; i < s.win_length; ++i) {
            const int64_t j = t * s.hop - s.n_fft / 2 + left + i;
            if (j < 0 || j >= n) continue;
            const float emphasized = j == 0 ? wave[0] : wave[j] - s.preemph * wave[j - 1];
            frame[left + i] = static_cast<double>(emphasized) * window[i];
        }
        const std::vector<std::complex<double>> spectrum = plain_dft(frame);
        for (int64_t m = 0; m < s.n_mels; ++m) {
            double energy = 0.0;
            for (int64_t k = 0; k < bins; ++k) energy += fb[m * bins + k] * std::norm(spectrum[k]);
            out[t * s.n_mels + m] = static_cast<float>(std::log(energy + s.log_guard));
        }
    }
    return out;
}

TEST(TranscribeFrontEnd, LogMelEqualsPlainDftOnRandomAudio) {
    std::mt19937 rng(11);
    const audio::MelSettings settings;
    const std::vector<float> wave = random_values(rng, 4321, -0.5f, 0.5f);
    const audio::LogMelFrontEnd front_end(settings, {}, {});
    ThreadPool pool(2);
    const audio::LogMel mel = front_end.compute(wave, &pool);
    EXPECT_EQ(mel.valid, 4321 / 160);
    EXPECT_EQ(mel.frames, 32);
    const std::vector<float> expected = plain_dft_log_mel(wave, settings);
    ASSERT_EQ(mel.values.size(), expected.size());
    EXPECT_LT(testing::max_abs_difference(mel.values, expected), 1e-4);
}

TEST(TranscribeFrontEnd, DefaultWindowAndFilterbankEqualTheCheckpoints) {
    const Checkpoint ck = Checkpoint::open(fixture_dir("transcribe_audio_tiny"));
    const std::vector<float> window = read_f32(ck.get("perception.preprocessor.featurizer.window"));
    const std::vector<float> fb = read_f32(ck.get("perception.preprocessor.featurizer.fb"));
    EXPECT_LT(testing::relative_error(audio::symmetric_hann_window(400), window), 1e-6);
    EXPECT_LT(testing::relative_error(audio::slaney_mel_filterbank(16000, 512, 128), fb), 1e-5);
}

TEST(TranscribeFrontEnd, TooShortAudioIsRejected) {
    const audio::LogMelFrontEnd front_end(audio::MelSettings{}, {}, {});
    const std::string message = testing::error_of([&] { front_end.compute(std::vector<float>(300, 0.1f), nullptr); });
    EXPECT_NE(message.find("too short"), std::string::npos) << message;
}

TEST(TranscribeFrontEnd, FixtureLogMel) {
    const std::string dir = fixture_dir("transcribe_audio_tiny");
    const SafetensorsFile expected = SafetensorsFile::open(dir + "/expected.safetensors");
    const Checkpoint ck = Checkpoint::open(dir);
    const std::vector<float> wave = read_f32(*expected.find("waveform"));
    const audio::LogMelFrontEnd front_end(audio::MelSettings{},
                                          read_f32(ck.get("perception.preprocessor.featurizer.window")),
                                          read_f32(ck.get("perception.preprocessor.featurizer.fb")));
    ThreadPool pool(2);
    const audio::LogMel mel = front_end.compute(wave, &pool);
    EXPECT_EQ(mel.valid, testing::read_i32(*expected.find("mel_length"))[0]);
    const std::vector<float> raw = read_f32(*expected.find("mel_raw"));
    ASSERT_EQ(mel.values.size(), raw.size());
    const double worst = testing::max_abs_difference(mel.values, raw);
    EXPECT_LT(worst, 1e-3) << "mel_raw max abs error";
    const audio::LogMel normalized = audio::normalize_per_feature(mel);
    EXPECT_LT(testing::relative_error(normalized.values, read_f32(*expected.find("mel_normalized"))), 1e-3);
    RecordProperty("mel_raw_max_abs", std::to_string(worst));
}

}  // namespace
}  // namespace duet
