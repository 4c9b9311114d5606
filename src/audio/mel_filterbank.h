// The defaults of NeMo's FilterbankFeatures, for checkpoints that do not carry their own window and
// filterbank: a symmetric Hann window and librosa's Slaney-normalised mel filterbank.
#pragma once

#include <cstdint>
#include <vector>

namespace duet::audio {

// torch.hann_window(length, periodic=False): 0.5 − 0.5·cos(2πn / (length − 1)).
std::vector<float> symmetric_hann_window(int64_t length);

// librosa.filters.mel(sr, n_fft, n_mels, fmin=0, fmax=sr/2, htk=False, norm="slaney") as float32,
// row-major [n_mels, n_fft/2 + 1].
std::vector<float> slaney_mel_filterbank(int64_t sample_rate, int64_t n_fft, int64_t n_mels);

}  // namespace duet::audio
