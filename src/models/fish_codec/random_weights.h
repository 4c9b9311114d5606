// Deterministic random codec weights (bf16, plain `.weight` names without weight norm) for benchmarks
// at the real codec's sizes and for the demo. Scaled so activations stay in a sane range; the audio
// they make is noise.
#pragma once

#include <cstdint>
#include <memory>

#include "base/thread_pool.h"
#include "models/fish_codec/config.h"
#include "models/tensor_set.h"

namespace duet::fish_codec {

std::shared_ptr<TensorSet> make_random_weights(const Config& config, uint64_t seed, ThreadPool* pool);

// The fixture-sized codec (fish_codec_tiny's codec_config.json).
Config tiny_config();

}  // namespace duet::fish_codec
