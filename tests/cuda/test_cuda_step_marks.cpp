// The clock reads behind DUET_CUDA_MARKS: each stores the device's nanosecond clock once the work
// before it on the stream is done, so a span around a kernel is at least that kernel's time.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"

namespace duet::cuda {
namespace {

class CudaStepMarks : public testing::DeviceTest {};

TEST_F(CudaStepMarks, ClockReadsFollowTheWorkBeforeThem) {
    DeviceBuffer slots(3 * sizeof(uint64_t));
    // A copy of 256 MiB between the reads takes tens of microseconds on any GPU.
    const size_t bytes = size_t(256) << 20;
    DeviceBuffer from(bytes), to(bytes);
    cudaStream_t stream = nullptr;
    DUET_CUDA_CHECK(cudaStreamCreate(&stream));
    record_time(slots.as<uint64_t>(), stream);
    DUET_CUDA_CHECK(cudaMemcpyAsync(to.data(), from.data(), bytes, cudaMemcpyDeviceToDevice, stream));
    record_time(slots.as<uint64_t>() + 1, stream);
    record_time(slots.as<uint64_t>() + 2, stream);
    DUET_CUDA_CHECK(cudaStreamSynchronize(stream));
    DUET_CUDA_CHECK(cudaStreamDestroy(stream));
    const std::vector<uint64_t> t = slots.download<uint64_t>(3);
    EXPECT_GT(t[0], 0u);
    EXPECT_GT(t[1] - t[0], 10'000u) << "the span around the copy, in ns";
    EXPECT_GE(t[2], t[1]);
    EXPECT_LT(t[2] - t[1], t[1] - t[0]) << "an empty span is shorter than the copy's";
}

}  // namespace
}  // namespace duet::cuda
