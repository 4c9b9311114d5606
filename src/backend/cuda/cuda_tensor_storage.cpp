#include "backend/cuda/cuda_tensor_storage.h"

#include <cuda_runtime_api.h>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/random_bf16.h"

namespace duet {

namespace {

class CudaTensorStorage final : public DeviceTensorStorage {
public:
    explicit CudaTensorStorage(int64_t min_elements) : min_elements_(min_elements) {
        require(cuda::device_count() > 0, "no CUDA device is available");
        require(min_elements >= 1, "cuda tensor storage: min_elements is ", min_elements, ", expected at least 1");
        DUET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    }
    ~CudaTensorStorage() override { cudaStreamDestroy(stream_); }

    std::string_view name() const override { return "cuda"; }
    int64_t min_elements() const override { return min_elements_; }

    std::shared_ptr<void> allocate(size_t bytes) override {
        void* p = nullptr;
        if (bytes > 0) {
            const cudaError_t status = cudaMalloc(&p, bytes);
            if (status != cudaSuccess) {
                cudaGetLastError();  // an allocation failure is not sticky; clear it
                fail("cannot allocate ", bytes, " bytes of CUDA device memory for weights: ", cudaGetErrorString(status),
                     " (", free_bytes(), " bytes free)");
            }
        }
        // A destructor cannot throw; a failing cudaFree means the context is already gone.
        return std::shared_ptr<void>(p, [](void* q) {
            if (q != nullptr) cudaFree(q);
        });
    }

    void fill_uniform_bf16(void* dst, int64_t count, uint64_t key, float lo, float hi) override {
        cuda::fill_uniform_bf16(static_cast<uint16_t*>(dst), count, key, lo, hi, stream_);
        DUET_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                   size_t rows) override {
        if (rows == 0 || row_bytes == 0) return;
        if (rows == 1) {
            // One piece: a plain copy (a 2D copy limits its pitch to the device's maximum).
            DUET_CUDA_CHECK(cudaMemcpyAsync(dst, src, row_bytes, cudaMemcpyDefault, stream_));
        } else {
            DUET_CUDA_CHECK(
                cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDefault, stream_));
        }
        DUET_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    bool holds(const void* p) const override {
        cudaPointerAttributes attributes{};
        if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
            cudaGetLastError();  // not a pointer the runtime knows: host memory
            return false;
        }
        return attributes.type == cudaMemoryTypeDevice;
    }

    size_t free_bytes() const override {
        size_t free = 0, total = 0;
        DUET_CUDA_CHECK(cudaMemGetInfo(&free, &total));
        return free;
    }

private:
    int64_t min_elements_;
    cudaStream_t stream_ = nullptr;
};

}  // namespace

std::shared_ptr<DeviceTensorStorage> make_cuda_tensor_storage(int64_t min_elements) {
    return std::make_shared<CudaTensorStorage>(min_elements);
}

}  // namespace duet
