#include "audio/log_mel.h"

#include <cmath>

#include "audio/fft.h"
#include "audio/mel_filterbank.h"
#include "base/error.h"
#include "base/thread_pool.h"

namespace duet::audio {

int64_t valid_mel_frames(int64_t samples, int64_t hop) { return samples / hop; }

int64_t padded_mel_frames(int64_t samples, int64_t hop, int64_t pad_to) {
    const int64_t stft_frames = 1 + samples / hop;
    return (stft_frames + pad_to - 1) / pad_to * pad_to;
}

LogMelFrontEnd::LogMelFrontEnd(const MelSettings& settings, std::vector<float> window,
                               std::vector<float> filterbank)
    : settings_(settings), filterbank_(std::move(filterbank)) {
    const MelSettings& s = settings_;
    require(s.win_length > 0 && s.win_length <= s.n_fft, "mel front end: window length ", s.win_length,
            " must be between 1 and n_fft ", s.n_fft);
    require(s.hop > 0 && s.pad_to > 0 && s.n_mels > 0, "mel front end: hop, pad_to and features must be positive");
    if (window.empty()) window = symmetric_hann_window(s.win_length);
    require(static_cast<int64_t>(window.size()) == s.win_length, "mel front end: window has ", window.size(),
            " values, expected ", s.win_length);
    const int64_t bins = s.n_fft / 2 + 1;
    if (filterbank_.empty()) filterbank_ = slaney_mel_filterbank(s.sample_rate, s.n_fft, s.n_mels);
    require(static_cast<int64_t>(filterbank_.size()) == s.n_mels * bins, "mel front end: filterbank has ",
            filterbank_.size(), " values, expected [", s.n_mels, ", ", bins, "]");
    // torch.stft pads a shorter window with zeros on both sides to n_fft.
    frame_window_.assign(static_cast<size_t>(s.n_fft), 0.0);
    const int64_t left = (s.n_fft - s.win_length) / 2;
    for (int64_t i = 0; i < s.win_length; ++i) frame_window_[left + i] = window[i];
    for (int64_t m = 0; m < s.n_mels; ++m) {
        const float* f = filterbank_.data() + m * bins;
        int64_t begin = 0, end = bins;
        while (begin < end && f[begin] == 0.0f) ++begin;
        while (end > begin && f[end - 1] == 0.0f) --end;
        filter_begin_.push_back(begin);
        filter_end_.push_back(end);
    }
}

LogMel LogMelFrontEnd::zero_rows(int64_t samples) const {
    const MelSettings& s = settings_;
    LogMel mel;
    mel.valid = valid_mel_frames(samples, s.hop);
    require(mel.valid >= 2, "audio of ", samples, " samples is too short: need at least ", 2 * s.hop,
            " (two ", s.hop, "-sample frames)");
    mel.frames = padded_mel_frames(samples, s.hop, s.pad_to);
    mel.n_mels = s.n_mels;
    mel.values.assign(static_cast<size_t>(mel.frames * s.n_mels), 0.0f);
    return mel;
}

LogMel LogMelFrontEnd::compute(const std::vector<float>& waveform, ThreadPool* pool) const {
    const MelSettings& s = settings_;
    const auto samples = static_cast<int64_t>(waveform.size());
    LogMel mel = zero_rows(samples);

    // Pre-emphasis in float32, as NeMo runs it on the float waveform.
    std::vector<float> emphasized(waveform.size());
    emphasized[0] = waveform[0];
    for (int64_t t = 1; t < samples; ++t) emphasized[t] = waveform[t] - s.preemph * waveform[t - 1];

    const Fft fft(s.n_fft);
    const int64_t bins = s.n_fft / 2 + 1, half = s.n_fft / 2;
    parallel_for(pool, mel.valid, 16, [&](int64_t begin, int64_t end) {
        std::vector<double> frame(static_cast<size_t>(s.n_fft)), power(static_cast<size_t>(bins));
        for (int64_t t = begin; t < end; ++t) {
            // Frame t is centred on sample t·hop; samples outside the signal are the STFT's zero padding.
            const int64_t start = t * s.hop - half;
            for (int64_t i = 0; i < s.n_fft; ++i) {
                const int64_t j = start + i;
                const double x = (j >= 0 && j < samples) ? emphasized[j] : 0.0;
                frame[i] = x * frame_window_[i];
            }
            fft.power_spectrum(frame.data(), power.data());
            float* out = mel.values.data() + t * s.n_mels;
            for (int64_t m = 0; m < s.n_mels; ++m) {
                const float* f = filterbank_.data() + m * bins;
                double energy = 0.0;
                for (int64_t k = filter_begin_[m]; k < filter_end_[m]; ++k) energy += f[k] * power[k];
                out[m] = static_cast<float>(std::log(energy + s.log_guard));
            }
        }
    });
    return mel;
}

LogMel normalize_per_feature(const LogMel& mel) {
    // Row by row, every bin's sum carried along: the same additions in the same order as bin by bin,
    // without striding through the whole recording once per bin (which took longer than the spectra).
    LogMel out = mel;
    const int64_t n = mel.valid, width = mel.n_mels;
    std::vector<double> mean(static_cast<size_t>(width), 0.0), squares(static_cast<size_t>(width), 0.0);
    for (int64_t t = 0; t < n; ++t) {
        const float* row = mel.row(t);
        for (int64_t m = 0; m < width; ++m) mean[m] += row[m];
    }
    for (double& m : mean) m /= static_cast<double>(n);
    for (int64_t t = 0; t < n; ++t) {
        const float* row = mel.row(t);
        for (int64_t m = 0; m < width; ++m) {
            const double d = row[m] - mean[m];
            squares[m] += d * d;
        }
    }
    std::vector<double> std_dev(static_cast<size_t>(width));
    for (int64_t m = 0; m < width; ++m) std_dev[m] = std::sqrt(squares[m] / static_cast<double>(n - 1)) + 1e-5;
    for (int64_t t = 0; t < n; ++t) {
        const float* row = mel.row(t);
        float* normalized = out.values.data() + t * width;
        for (int64_t m = 0; m < width; ++m) normalized[m] = static_cast<float>((row[m] - mean[m]) / std_dev[m]);
    }
    return out;
}

}  // namespace duet::audio
