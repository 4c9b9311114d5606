#include "audio/resample.h"

#include <soxr.h>

#include <cmath>

#include "base/error.h"

namespace duet {

std::vector<float> resample(const std::vector<float>& mono, int from_rate, int to_rate) {
    require(from_rate > 0 && to_rate > 0, "resample: sample rates must be positive, got ", from_rate, " and ",
            to_rate);
    if (from_rate == to_rate || mono.empty()) return mono;
    const double ratio = static_cast<double>(to_rate) / from_rate;
    const size_t out_len = static_cast<size_t>(std::llround(static_cast<double>(mono.size()) * ratio));
    std::vector<float> out(out_len);
    if (out_len == 0) return out;

    const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
    size_t done = 0;
    // soxr_oneshot flushes the filter at the end, so the output is the whole signal, delay-compensated.
    const soxr_error_t err = soxr_oneshot(from_rate, to_rate, 1, mono.data(), mono.size(), nullptr, out.data(),
                                          out.size(), &done, &io, &quality, nullptr);
    require(err == nullptr, "resample from ", from_rate, " to ", to_rate, " Hz failed: ", err ? err : "");
    out.resize(done);
    // A sample short of the rounded length at the very end is padded, so lengths are predictable.
    out.resize(out_len, 0.0f);
    return out;
}

}  // namespace duet
