// Random Nemotron-H weights in the hub layout, generated deterministically from a seed, for
// benchmarks at real model sizes and the built-in demo. The values are scaled so activations stay
// in a sane range, but the model they make produces noise.
#pragma once

#include <cstdint>
#include <memory>

#include "base/thread_pool.h"
#include "models/nemotron_h/config.h"
#include "models/tensor_set.h"

namespace duet::nemotron_h {

// With `with_draft` (and attention and MoE sizes in the config) the draft (MTP) module is included.
// With `device`, the large tensors are made in its memory (see RandomTensorWriter).
std::shared_ptr<TensorSet> make_random_weights(const Config& config, uint64_t seed, ThreadPool* pool,
                                               bool with_draft = true,
                                               std::shared_ptr<DeviceTensorStorage> device = nullptr);

}  // namespace duet::nemotron_h
