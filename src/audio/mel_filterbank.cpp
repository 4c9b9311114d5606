#include "audio/mel_filterbank.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace duet::audio {

namespace {

// Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above.
constexpr double kHzPerMel = 200.0 / 3.0;
constexpr double kLogStartHz = 1000.0;
constexpr double kLogStartMel = kLogStartHz / kHzPerMel;

double log_step() { return std::log(6.4) / 27.0; }

double hz_to_mel(double hz) {
    return hz >= kLogStartHz ? kLogStartMel + std::log(hz / kLogStartHz) / log_step() : hz / kHzPerMel;
}

double mel_to_hz(double mel) {
    return mel >= kLogStartMel ? kLogStartHz * std::exp(log_step() * (mel - kLogStartMel)) : mel * kHzPerMel;
}

}  // namespace

std::vector<float> symmetric_hann_window(int64_t length) {
    std::vector<float> window(static_cast<size_t>(length));
    if (length == 1) {
        window[0] = 1.0f;
        return window;
    }
    for (int64_t n = 0; n < length; ++n) {
        const double phase = 2.0 * std::numbers::pi * static_cast<double>(n) / static_cast<double>(length - 1);
        window[static_cast<size_t>(n)] = static_cast<float>(0.5 - 0.5 * std::cos(phase));
    }
    return window;
}

std::vector<float> slaney_mel_filterbank(int64_t sample_rate, int64_t n_fft, int64_t n_mels) {
    const int64_t bins = n_fft / 2 + 1;
    const double nyquist = static_cast<double>(sample_rate) / 2.0;
    std::vector<double> bin_hz(static_cast<size_t>(bins));
    for (int64_t k = 0; k < bins; ++k) bin_hz[k] = nyquist * static_cast<double>(k) / static_cast<double>(bins - 1);
    // n_mels + 2 edges evenly spaced in mel between 0 Hz and Nyquist.
    std::vector<double> edge_hz(static_cast<size_t>(n_mels + 2));
    const double top_mel = hz_to_mel(nyquist);
    for (int64_t i = 0; i < n_mels + 2; ++i) {
        edge_hz[i] = mel_to_hz(top_mel * static_cast<double>(i) / static_cast<double>(n_mels + 1));
    }
    std::vector<float> fb(static_cast<size_t>(n_mels * bins));
    for (int64_t m = 0; m < n_mels; ++m) {
        const double rise = edge_hz[m + 1] - edge_hz[m], fall = edge_hz[m + 2] - edge_hz[m + 1];
        const double area_norm = 2.0 / (edge_hz[m + 2] - edge_hz[m]);
        for (int64_t k = 0; k < bins; ++k) {
            const double lower = (bin_hz[k] - edge_hz[m]) / rise;
            const double upper = (edge_hz[m + 2] - bin_hz[k]) / fall;
            fb[m * bins + k] = static_cast<float>(std::max(0.0, std::min(lower, upper)) * area_norm);
        }
    }
    return fb;
}

}  // namespace duet::audio
