#include "kernels/cuda/device_buffer.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace duet::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    cudaError_t status = cudaMalloc(&data_, bytes);
    if (status != cudaSuccess) {
        cudaGetLastError();  // an allocation failure is not sticky; clear it
        data_ = nullptr;
        bytes_ = 0;
        fail("cannot allocate ", bytes, " bytes of CUDA device memory: ",
             cudaGetErrorString(status), " (", cudaGetErrorName(status), ")");
    }
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

void DeviceBuffer::release() noexcept {
    // A destructor cannot throw; a failing cudaFree here means the context is
    // already broken, and the next checked call will report that.
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
}

void DeviceBuffer::copy_from_host(const void* source, size_t bytes) {
    require(bytes <= bytes_, "upload of ", bytes, " bytes into a device buffer of ", bytes_,
            " bytes");
    if (bytes == 0) return;
    DUET_CUDA_CHECK(cudaMemcpy(data_, source, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::copy_to_host(void* destination, size_t bytes) const {
    require(bytes <= bytes_, "download of ", bytes, " bytes from a device buffer of ", bytes_,
            " bytes");
    if (bytes == 0) return;
    DUET_CUDA_CHECK(cudaMemcpy(destination, data_, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace duet::cuda
