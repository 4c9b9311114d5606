// Memory outside the host for a TensorSet's large tensors (a GPU's), with the few things random
// weights need done where they live. The interface keeps src/models free of any device API; an
// implementation lives beside its backend (backend/cuda/cuda_tensor_storage.h) and is built only
// with it. Models built from such a set must run on that device's backend: the host cannot read
// these bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace duet {

class DeviceTensorStorage {
public:
    virtual ~DeviceTensorStorage() = default;

    // The device, for messages ("cuda").
    virtual std::string_view name() const = 0;

    // Tensors of at least this many elements that RandomTensorWriter makes go here; smaller ones
    // (norm weights, biases, conv taps: what models widen on the host) stay in host memory.
    virtual int64_t min_elements() const = 0;

    // `bytes` of device memory (contents undefined), freed when the last copy of the pointer goes.
    virtual std::shared_ptr<void> allocate(size_t bytes) = 0;

    // dst[i] = counter_random::uniform_bf16(key, i, lo, hi) for i < count, dst in this storage;
    // done when the call returns.
    virtual void fill_uniform_bf16(void* dst, int64_t count, uint64_t key, float lo, float hi) = 0;

    // `rows` pieces of `row_bytes`, from rows `src_pitch` bytes apart to rows `dst_pitch` bytes
    // apart; either side may be host memory or this storage's. Done when the call returns.
    virtual void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                           size_t rows) = 0;

    // Whether `p` points into this device's memory.
    virtual bool holds(const void* p) const = 0;

    // Bytes the device has free now.
    virtual size_t free_bytes() const = 0;
};

}  // namespace duet
