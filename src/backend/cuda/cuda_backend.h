// The CUDA backend: every op of backend.h as kernels on one stream. Weights stay where the model
// loaded them (host memory); the first op that reads a weight copies it to the device, and later
// ops reuse that copy, so a model runs on the GPU without knowing it. Weights already in device
// memory (random weights made on the GPU) are used in place.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace duet {

// Throws when no CUDA device is usable.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace duet
