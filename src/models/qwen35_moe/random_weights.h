// Random Qwen3.5-MoE weights (bf16, fused experts under `model.language_model.`, the layout Drama 3
// ships), generated deterministically from a seed, for benchmarks at real model sizes. The values
// are scaled so activations stay in a sane range, but the model they make produces noise.
#pragma once

#include <cstdint>
#include <memory>

#include "base/thread_pool.h"
#include "models/qwen35_moe/config.h"
#include "models/tensor_set.h"

namespace duet::qwen35_moe {

// With `device`, the large tensors are made in its memory (see RandomTensorWriter).
std::shared_ptr<TensorSet> make_random_weights(const Config& config, uint64_t seed, ThreadPool* pool,
                                               std::shared_ptr<DeviceTensorStorage> device = nullptr);

}  // namespace duet::qwen35_moe
