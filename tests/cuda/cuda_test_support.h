// Shared pieces of the CUDA test suites.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/cuda/cuda_device.h"

namespace duet::cuda::testing {

// Fixture for tests that need a GPU: on a machine without one they are
// skipped, not failed, so the suite stays green on CPU-only builders.
class DeviceTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (device_count() == 0) {
            GTEST_SKIP() << "no CUDA device or driver on this machine";
        }
    }
    // A failed CUDA call whose error nobody read would surface in a later test: blame this one.
    void TearDown() override {
        if (device_count() == 0) return;
        const cudaError_t pending = cudaGetLastError();
        EXPECT_EQ(pending, cudaSuccess) << "CUDA error left unread: " << cudaGetErrorString(pending);
    }
};

}  // namespace duet::cuda::testing
