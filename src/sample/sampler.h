// Drawing one index from logits: top-k, then top-p on the untempered softmax, then temperature,
// then one draw with a given uniform number. Temperature 0 is argmax. Repetition-aware sampling
// (RAS) redraws a choice that the recent past already repeats, from the full distribution.
#pragma once

#include <cstdint>
#include <span>

namespace duet {

struct SamplingParams {
    float temperature = 1.0f;  // 0: argmax
    int64_t top_k = 30;        // 0: no limit
    float top_p = 0.9f;        // 1: no limit
    uint64_t seed = 0;
};

// The index drawn with `uniform` in [0, 1). Ties order by index, so the draw is reproducible.
int32_t sample_index(std::span<const float> logits, const SamplingParams& params, float uniform);

// The probabilities sample_index draws from (zero outside the kept set), for tests and checks.
void sampling_distribution(std::span<const float> logits, const SamplingParams& params, std::span<double> out);

struct RasParams {
    int64_t window = 16;      // the last this many main tokens
    int64_t min_repeats = 2;  // ASSUMED: a choice seen this often in the window is redrawn
};

// ASSUMED (the threshold): true when `token` occurs at least min_repeats times in `recent`.
bool ras_should_redraw(std::span<const int32_t> recent, int32_t token, const RasParams& ras);

// A main token: drawn as sample_index does with `first`; when RAS's rule holds for the choice (and
// it is not `exempt`, e.g. EOS), redrawn from the full softmax at temperature 1 with `second`.
// Temperature 0 is argmax, never redrawn.
int32_t sample_with_ras(std::span<const float> logits, const SamplingParams& params, const RasParams& ras,
                        std::span<const int32_t> recent, float first, float second, int32_t exempt = -1);

}  // namespace duet
