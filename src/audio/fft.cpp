#include "audio/fft.h"

#include <cmath>
#include <numbers>
#include <utility>

#include "base/error.h"

namespace duet::audio {

Fft::Fft(int64_t n) : n_(n) {
    require(n >= 2 && (n & (n - 1)) == 0, "FFT size ", n, " is not a power of two (need n_fft = 2^k)");
    int bits = 0;
    while ((int64_t{1} << bits) < n) ++bits;
    bit_reversed_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        int64_t r = 0;
        for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
        bit_reversed_[static_cast<size_t>(i)] = r;
    }
    twiddles_.resize(static_cast<size_t>(n / 2));
    for (int64_t k = 0; k < n / 2; ++k) {
        const double angle = -2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
        twiddles_[static_cast<size_t>(k)] = {std::cos(angle), std::sin(angle)};
    }
}

void Fft::forward(std::complex<double>* data) const {
    for (int64_t i = 0; i < n_; ++i) {
        const int64_t r = bit_reversed_[static_cast<size_t>(i)];
        if (i < r) std::swap(data[i], data[r]);
    }
    for (int64_t len = 2; len <= n_; len <<= 1) {
        const int64_t half = len / 2, step = n_ / len;
        for (int64_t start = 0; start < n_; start += len) {
            for (int64_t j = 0; j < half; ++j) {
                const std::complex<double> t = twiddles_[static_cast<size_t>(j * step)] * data[start + j + half];
                data[start + j + half] = data[start + j] - t;
                data[start + j] += t;
            }
        }
    }
}

void Fft::power_spectrum(const double* signal, double* out) const {
    std::vector<std::complex<double>> buffer(signal, signal + n_);
    forward(buffer.data());
    for (int64_t k = 0; k <= n_ / 2; ++k) out[k] = std::norm(buffer[static_cast<size_t>(k)]);
}

}  // namespace duet::audio
