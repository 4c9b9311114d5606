// Random Drama 3 weights (bf16, the checkpoint's names), generated deterministically from a seed,
// for the demo and benchmarks at real sizes. The model they make produces noise.
#pragma once

#include <cstdint>
#include <memory>

#include "base/thread_pool.h"
#include "models/drama3/config.h"
#include "models/tensor_set.h"

namespace duet::drama3 {

// With `device`, the large tensors are made in its memory (see RandomTensorWriter).
std::shared_ptr<TensorSet> make_random_weights(const Config& config, uint64_t seed, ThreadPool* pool,
                                               std::shared_ptr<DeviceTensorStorage> device = nullptr);
// The bytes those weights take.
size_t random_weight_bytes(const Config& config);

}  // namespace duet::drama3
