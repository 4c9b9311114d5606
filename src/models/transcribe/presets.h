// Perception sizes known without a checkpoint: `tiny` (the transcribe_audio_tiny fixture's sizes)
// and `real` (Nemotron 3.5 Transcribe's encoders), with deterministic random weights for tests and
// benchmarks.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/thread_pool.h"
#include "models/tensor_set.h"
#include "models/transcribe/config.h"

namespace duet::transcribe {

PerceptionConfig perception_preset(std::string_view name);
std::vector<std::string_view> perception_preset_names();

// Bytes make_random_perception_weights allocates (bf16), to refuse sizes a machine cannot hold.
size_t random_perception_weight_bytes(const PerceptionConfig& config);

// Every perception.* tensor of `config` (bf16, no window or filterbank: the defaults apply).
std::shared_ptr<TensorSet> make_random_perception_weights(const PerceptionConfig& config, uint64_t seed,
                                                          ThreadPool* pool);

}  // namespace duet::transcribe
