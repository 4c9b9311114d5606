// Error reporting and buffer ownership: the parts that work without a GPU are
// tested unconditionally.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "cuda_test_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"

namespace duet::cuda {
namespace {

TEST(CudaCheck, SuccessDoesNotThrow) { EXPECT_NO_THROW(DUET_CUDA_CHECK(cudaSuccess)); }

TEST(CudaCheck, FailureNamesCallLocationAndReason) {
    auto failing_call = [] { return cudaErrorInvalidValue; };
    try {
        DUET_CUDA_CHECK(failing_call());
        FAIL() << "expected duet::Error";
    } catch (const Error& error) {
        const std::string message = error.what();
        EXPECT_NE(message.find("failing_call()"), std::string::npos) << message;
        EXPECT_NE(message.find("test_cuda_check.cpp:"), std::string::npos) << message;
        EXPECT_NE(message.find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos)
            << message;
        EXPECT_NE(message.find("cudaErrorInvalidValue"), std::string::npos) << message;
    }
}

TEST(CudaCheck, EvaluatesTheCallOnce) {
    int calls = 0;
    auto counted_call = [&] {
        ++calls;
        return cudaSuccess;
    };
    DUET_CUDA_CHECK(counted_call());
    EXPECT_EQ(calls, 1);
}

TEST(CudaDeviceBuffer, EmptyBufferNeedsNoDevice) {
    DeviceBuffer empty(0);
    EXPECT_EQ(empty.data(), nullptr);
    EXPECT_EQ(empty.size_bytes(), 0u);
    EXPECT_NO_THROW(empty.upload(std::vector<float>{}));
    EXPECT_TRUE(empty.download<float>(0).empty());
    EXPECT_THROW(empty.upload(std::vector<float>{1.0f}), Error);
}

class CudaDeviceBufferOnDevice : public testing::DeviceTest {};

TEST_F(CudaDeviceBufferOnDevice, RoundTripsValues) {
    const std::vector<float> values{1.5f, -2.0f, 3.25f, 0.0f, 1e-30f};
    DeviceBuffer buffer = DeviceBuffer::from_vector(values);
    EXPECT_EQ(buffer.size_bytes(), values.size() * sizeof(float));
    EXPECT_NE(buffer.data(), nullptr);
    EXPECT_EQ(buffer.download<float>(values.size()), values);
}

TEST_F(CudaDeviceBufferOnDevice, MoveTransfersOwnership) {
    DeviceBuffer first(256);
    void* address = first.data();
    DeviceBuffer second(std::move(first));
    EXPECT_EQ(first.data(), nullptr);
    EXPECT_EQ(first.size_bytes(), 0u);
    EXPECT_EQ(second.data(), address);
    EXPECT_EQ(second.size_bytes(), 256u);

    DeviceBuffer third(64);
    third = std::move(second);  // frees third's own block, takes second's
    EXPECT_EQ(third.data(), address);
    EXPECT_EQ(third.size_bytes(), 256u);
}

TEST_F(CudaDeviceBufferOnDevice, RejectsOversizedCopies) {
    DeviceBuffer buffer(8);
    EXPECT_THROW(buffer.upload(std::vector<float>(3)), Error);
    EXPECT_THROW(buffer.download<float>(3), Error);
}

TEST_F(CudaDeviceBufferOnDevice, ImpossibleAllocationThrows) {
    EXPECT_THROW({ DeviceBuffer huge(size_t(1) << 60); }, Error);
    // The failure must not poison later calls.
    EXPECT_NO_THROW({ DeviceBuffer small(1024); });
}

}  // namespace
}  // namespace duet::cuda
