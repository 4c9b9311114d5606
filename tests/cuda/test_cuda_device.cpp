// Device discovery and the bandwidth probes.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "base/error.h"
#include "cuda_test_support.h"
#include "kernels/cuda/bandwidth.h"
#include "kernels/cuda/cuda_device.h"

namespace duet::cuda {
namespace {

TEST(CudaDeviceArguments, CountIsNeverNegative) { EXPECT_GE(device_count(), 0); }

TEST(CudaDeviceArguments, OutOfRangeIndexThrows) {
    EXPECT_THROW(device_info(-1), Error);
    EXPECT_THROW(device_info(device_count()), Error);
}

class CudaDevice : public testing::DeviceTest {};

TEST_F(CudaDevice, InfoFieldsAreSane) {
    for (int index = 0; index < device_count(); ++index) {
        const DeviceInfo info = device_info(index);
        std::cout << "device " << info.index << ": " << info.name << ", sm_" << info.sm_major
                  << info.sm_minor << ", " << info.multiprocessors << " SMs, "
                  << double(info.total_bytes) / (1u << 30) << " GiB, peak "
                  << info.peak_bandwidth_gbs << " GB/s\n";
        EXPECT_EQ(info.index, index);
        EXPECT_FALSE(info.name.empty());
        EXPECT_GE(info.sm_major, 3);
        EXPECT_GE(info.sm_minor, 0);
        EXPECT_GT(info.total_bytes, size_t(0));
        EXPECT_GT(info.multiprocessors, 0);
        EXPECT_TRUE(std::isfinite(info.peak_bandwidth_gbs));
        EXPECT_GE(info.peak_bandwidth_gbs, 0.0);
    }
}

class CudaBandwidth : public testing::DeviceTest {};

// Large enough to spill the L2 of current parts, small enough to be quick.
constexpr size_t kProbeBytes = size_t(256) << 20;

TEST_F(CudaBandwidth, CopyIsPositiveAndFinite) {
    const double gbs = measure_device_copy_bandwidth_gbs(kProbeBytes);
    std::cout << "device copy bandwidth: " << gbs << " GB/s (read + write)\n";
    EXPECT_TRUE(std::isfinite(gbs));
    EXPECT_GT(gbs, 0.0);
}

TEST_F(CudaBandwidth, ReadIsPositiveAndFinite) {
    const double gbs = measure_device_read_bandwidth_gbs(kProbeBytes);
    std::cout << "device read bandwidth: " << gbs << " GB/s\n";
    EXPECT_TRUE(std::isfinite(gbs));
    EXPECT_GT(gbs, 0.0);
}

TEST(CudaBandwidthArguments, EmptyBufferThrows) {
    EXPECT_THROW(measure_device_copy_bandwidth_gbs(0), Error);
    EXPECT_THROW(measure_device_read_bandwidth_gbs(15), Error);
}

}  // namespace
}  // namespace duet::cuda
