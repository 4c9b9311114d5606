// Named tensors held in memory, with the same lookup as a checkpoint: used for models built from
// random weights (benchmarks, the demo) and written out as safetensors. With a device storage the
// large tensors can live in a device's memory instead of the host's.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "models/device_tensor_storage.h"

namespace duet {

class TensorSet {
public:
    TensorSet() = default;
    // `device` (may be null) holds the tensors added with add_on_device.
    explicit TensorSet(std::shared_ptr<DeviceTensorStorage> device) : device_(std::move(device)) {}

    // Adds a zero-filled tensor and returns its bytes to fill in. The bytes stay at the same address.
    uint8_t* add(const std::string& name, DType dtype, std::vector<int64_t> shape);
    // Adds a tensor in the device storage's memory (contents undefined) and returns its device address;
    // its entry says on_device. Needs a device storage.
    uint8_t* add_on_device(const std::string& name, DType dtype, std::vector<int64_t> shape);

    // The storage given at construction, or null.
    DeviceTensorStorage* device_storage() const { return device_.get(); }

    const TensorEntry* find(std::string_view name) const;
    std::vector<const TensorEntry*> all() const;  // in the order added
    size_t total_bytes() const;                   // host and device
    size_t device_bytes() const;
    // Refuses sets with tensors in device memory.
    void write(const std::string& path) const;

private:
    struct Owned {
        TensorEntry entry;
        std::shared_ptr<uint8_t> bytes;  // host memory (base/host_memory.h)
        std::shared_ptr<void> device_bytes;
    };
    Owned& add_entry(const std::string& name, DType dtype, std::vector<int64_t> shape);

    std::shared_ptr<DeviceTensorStorage> device_;
    std::deque<Owned> tensors_;
    std::map<std::string, const TensorEntry*, std::less<>> by_name_;
};

}  // namespace duet
