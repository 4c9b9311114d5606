// Radix-2 fast Fourier transform in double precision, for the log-mel front end. The spectra feed a
// logarithm, where float rounding of small bins shows; double keeps the transform's own error far
// below the front end's tolerance.
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

namespace duet::audio {

class Fft {
public:
    // n must be a power of two, at least 2.
    explicit Fft(int64_t n);

    int64_t size() const { return n_; }

    // In-place forward transform X[k] = Σ x[t]·e^(−2πi·kt/n) of n values.
    void forward(std::complex<double>* data) const;

    // |X[k]|² for k = 0 … n/2 of a real signal of n values (out has room for n/2 + 1).
    void power_spectrum(const double* signal, double* out) const;

    // e^(−2πi·k/n) for k < n/2, as forward() uses them.
    const std::vector<std::complex<double>>& twiddles() const { return twiddles_; }

private:
    int64_t n_;
    std::vector<int64_t> bit_reversed_;          // the input order of the iterative transform
    std::vector<std::complex<double>> twiddles_;  // e^(−2πi·k/n) for k < n/2
};

}  // namespace duet::audio
