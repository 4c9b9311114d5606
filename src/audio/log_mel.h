// The log-mel front end exactly as NeMo's FilterbankFeatures computes it at inference: pre-emphasis,
// a centred STFT (n_fft/2 zeros each side) with the window centred in the n_fft frame, the power
// spectrum through the mel filterbank, ln(x + guard), frames past the valid length set to 0, and the
// frame count padded with zero frames to a multiple of pad_to. No dither.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace duet {
class ThreadPool;
}

namespace duet::audio {

struct MelSettings {
    int64_t sample_rate = 16000;
    int64_t n_fft = 512;
    int64_t win_length = 400;
    int64_t hop = 160;
    int64_t n_mels = 128;
    int64_t pad_to = 16;
    float preemph = 0.97f;
    double log_guard = 5.960464477539063e-08;  // 2^-24
};

// Row-major [frames, n_mels]; rows >= valid are 0.
struct LogMel {
    int64_t frames = 0;
    int64_t valid = 0;
    int64_t n_mels = 0;
    std::vector<float> values;

    const float* row(int64_t t) const { return values.data() + t * n_mels; }
};

// NeMo's seq_len: floor(samples / hop) frames hold audio.
int64_t valid_mel_frames(int64_t samples, int64_t hop);
// The centred STFT's 1 + floor(samples / hop) frames, padded to a multiple of pad_to.
int64_t padded_mel_frames(int64_t samples, int64_t hop, int64_t pad_to);

class LogMelFrontEnd {
public:
    // `window` [win_length] and `filterbank` [n_mels, n_fft/2 + 1] as the checkpoint stores them;
    // empty ones are replaced by NeMo's defaults (symmetric Hann, Slaney mel).
    LogMelFrontEnd(const MelSettings& settings, std::vector<float> window, std::vector<float> filterbank);

    const MelSettings& settings() const { return settings_; }

    // The log-mel of 16 kHz mono samples; needs at least two valid frames.
    LogMel compute(const std::vector<float>& waveform, ThreadPool* pool) const;

    // compute()'s result before its rows are filled in: the frame counts of `samples` samples, every
    // value 0; fails as compute() does for too short an input.
    LogMel zero_rows(int64_t samples) const;

    // What compute() works with, for another device's form of it.
    const std::vector<double>& frame_window() const { return frame_window_; }
    const std::vector<float>& filterbank() const { return filterbank_; }
    int64_t filter_begin(int64_t mel) const { return filter_begin_[static_cast<size_t>(mel)]; }
    int64_t filter_end(int64_t mel) const { return filter_end_[static_cast<size_t>(mel)]; }

private:
    MelSettings settings_;
    std::vector<double> frame_window_;  // the window zero-padded and centred in n_fft values
    std::vector<float> filterbank_;
    // The non-zero stretch [begin, end) of each mel filter, so the filterbank product skips zeros.
    std::vector<int64_t> filter_begin_, filter_end_;
};

// NeMo's per_feature normalisation for the ASR branch: each mel bin minus its mean over the valid
// frames, divided by (its standard deviation with N − 1) + 1e-5; rows >= valid stay 0.
LogMel normalize_per_feature(const LogMel& mel);

// Both forms of a recording's log-mel: the raw rows (the speaker branch's input) and the normalised
// ones (the ASR branch's).
struct LogMelForms {
    LogMel raw, normalized;
};

}  // namespace duet::audio
