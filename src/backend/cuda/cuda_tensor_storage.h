// Device memory of the current CUDA device for a TensorSet's large tensors: random weights are
// generated there by a kernel, and the CUDA backend uses them in place.
#pragma once

#include <cstdint>
#include <memory>

#include "models/device_tensor_storage.h"

namespace duet {

// Tensors of at least `min_elements` go to the device (see DeviceTensorStorage::min_elements).
// Throws when no CUDA device is usable.
std::shared_ptr<DeviceTensorStorage> make_cuda_tensor_storage(int64_t min_elements = int64_t(1) << 20);

}  // namespace duet
