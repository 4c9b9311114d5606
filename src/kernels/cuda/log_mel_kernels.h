// Transcribe's log-mel front end on the GPU (backend/cuda/cuda_speech_encoder.h runs it), step for
// step as audio::LogMelFrontEnd and audio::normalize_per_feature compute it on the CPU: the same
// double-precision radix-2 transform, the same sums in the same order, every product and sum
// rounded on its own (no fused multiply-adds), so the rows agree with the CPU's to the last bit but
// for the logarithm's own rounding. Host-only header; the launchers queue on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace duet::cuda::mel {

// What the frames kernel reads; every array is on the device.
struct LogMelFramesArgs {
    const float* waveform = nullptr;  // [samples], before pre-emphasis
    int64_t samples = 0;
    float preemph = 0.0f;
    int64_t n_fft = 0, hop = 0, n_mels = 0;
    const double* frame_window = nullptr;  // [n_fft]: the window centred in the frame, zeros around it
    const double* twiddles = nullptr;      // [n_fft / 2] pairs (cos, sin) of −2πk / n_fft
    const float* filterbank = nullptr;     // [n_mels, n_fft / 2 + 1]
    const int32_t* filter_range = nullptr;  // [n_mels] pairs: each filter's non-zero bins [begin, end)
    double log_guard = 0.0;
    int64_t valid = 0;  // frames computed; the rows after them are left as they are
    float* out = nullptr;  // [frames, n_mels]
};

// The largest transform the frames kernel takes (its frame sits in shared memory).
inline constexpr int64_t kMaxFftSize = 2048;

// Rows 0 … valid − 1 of the log-mel.
void log_mel_frames(const LogMelFramesArgs& args, cudaStream_t stream);

// normalize_per_feature of rows [frames, n_mels], of which the first `valid` (at least 2) hold
// audio, into out (the rows after them left as they are).
void normalize_per_feature(const float* mel, int64_t valid, int64_t n_mels, float* out, cudaStream_t stream);

}  // namespace duet::cuda::mel
