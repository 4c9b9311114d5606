// Activation and state memory owned by a backend: host memory for the CPU backend, device
// memory for an accelerator. Copies share the allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace duet {

class Buffer {
public:
    Buffer() = default;
    Buffer(std::shared_ptr<float[]> data, size_t count) : data_(std::move(data)), count_(count) {}

    float* data() const { return data_.get(); }
    // The same memory as int32 values (ids, positions, counters).
    int32_t* ints() const { return reinterpret_cast<int32_t*>(data_.get()); }
    size_t size() const { return count_; }
    size_t bytes() const { return count_ * sizeof(float); }

private:
    std::shared_ptr<float[]> data_;
    size_t count_ = 0;
};

}  // namespace duet
