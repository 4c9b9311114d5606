// Reading the audio a speech model listens to: a sound file (any format libsndfile reads, mixed
// down to mono and resampled), or a .safetensors file holding `waveform` [N] f32 already at the
// model's rate (the checking form's input).
#pragma once

#include <string>
#include <vector>

namespace duet::audio {

// Mono samples at `sample_rate`; errors name the path and what was expected.
std::vector<float> read_speech_input(const std::string& path, int sample_rate);

}  // namespace duet::audio
