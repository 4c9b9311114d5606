// Sample-rate conversion with soxr at its high-quality setting, for audio whose rate differs from
// the rate a model was trained at (the codec: 44.1 kHz).
#pragma once

#include <vector>

namespace duet {

// Mono samples at from_rate converted to to_rate; the output has round(n · to_rate / from_rate)
// samples, aligned with the input (soxr's delay removed). Returns the input unchanged when the rates
// are equal.
std::vector<float> resample(const std::vector<float>& mono, int from_rate, int to_rate);

}  // namespace duet
