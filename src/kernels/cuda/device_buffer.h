// Owning handle to a block of device memory. Host-only header.
#pragma once

#include <cstddef>
#include <vector>

#include "base/error.h"

namespace duet::cuda {

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    // Allocates `bytes` of device memory on the current device (contents
    // undefined). Zero bytes allocates nothing and leaves data() null.
    explicit DeviceBuffer(size_t bytes);
    ~DeviceBuffer();

    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    // A buffer sized to hold `values`, filled with them.
    template <typename T>
    static DeviceBuffer from_vector(const std::vector<T>& values) {
        DeviceBuffer buffer(values.size() * sizeof(T));
        buffer.upload(values);
        return buffer;
    }

    void* data() { return data_; }
    const void* data() const { return data_; }
    template <typename T>
    T* as() {
        return static_cast<T*>(data_);
    }
    template <typename T>
    const T* as() const {
        return static_cast<const T*>(data_);
    }
    size_t size_bytes() const { return bytes_; }

    // Copies `values` to the start of the buffer; they must fit.
    template <typename T>
    void upload(const std::vector<T>& values) {
        copy_from_host(values.data(), values.size() * sizeof(T));
    }

    // Copies the first `count` elements of the buffer back to the host.
    template <typename T>
    std::vector<T> download(size_t count) const {
        std::vector<T> values(count);
        copy_to_host(values.data(), count * sizeof(T));
        return values;
    }

    // Synchronous byte copies between the host and the start of the buffer.
    void copy_from_host(const void* source, size_t bytes);
    void copy_to_host(void* destination, size_t bytes) const;

private:
    void release() noexcept;

    void* data_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace duet::cuda
