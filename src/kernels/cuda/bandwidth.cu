#include "kernels/cuda/bandwidth.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/occupancy.h"
#include "kernels/cuda/stream_timer.h"

namespace duet::cuda {

namespace {

constexpr int kWarmupRuns = 2;
constexpr int kTimedRuns = 10;
constexpr int kReadThreadsPerBlock = 512;
constexpr int kReadLoadsInFlight = 4;

// The shortest of the timed runs of `work` in seconds: the run least disturbed by clocks ramping up
// or other work on the device.
template <typename Work>
double best_seconds(StreamTimer& timer, Work&& work) {
    const std::vector<double> ms = timer.run_ms(work, kWarmupRuns, kTimedRuns);
    return *std::min_element(ms.begin(), ms.end()) * 1e-3;
}

// Reads every 16-byte word once and folds them into `sink`, so the compiler
// cannot drop the loads. XOR is used because it is the cheapest fold.
__global__ void __launch_bounds__(kReadThreadsPerBlock)
    read_all_kernel(const uint4* __restrict__ data, int64_t count, unsigned int* sink) {
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    unsigned int fold = 0;
    for (; i + (kReadLoadsInFlight - 1) * stride < count; i += kReadLoadsInFlight * stride) {
        uint4 v[kReadLoadsInFlight];
#pragma unroll
        for (int u = 0; u < kReadLoadsInFlight; ++u) v[u] = __ldcs(data + i + u * stride);
#pragma unroll
        for (int u = 0; u < kReadLoadsInFlight; ++u) fold ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < count; i += stride) {
        const uint4 v = __ldcs(data + i);
        fold ^= v.x ^ v.y ^ v.z ^ v.w;
    }
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        fold ^= __shfl_xor_sync(0xFFFFFFFFu, fold, offset);
    }
    if (threadIdx.x % kWarpSize == 0) atomicXor(sink, fold);
}

// Enough blocks to fill every multiprocessor once, so the grid-stride loop
// runs with full occupancy and no tail of partly filled waves.
int resident_read_blocks() { return std::max(1, resident_blocks(read_all_kernel, kReadThreadsPerBlock)); }

}  // namespace

double measure_device_copy_bandwidth_gbs(size_t bytes) {
    require(bytes > 0, "bandwidth measurement needs a non-empty buffer");
    DeviceBuffer source(bytes);
    DeviceBuffer destination(bytes);
    // Touch both buffers first so page mapping is not part of the timing.
    DUET_CUDA_CHECK(cudaMemset(source.data(), 0x5A, bytes));
    DUET_CUDA_CHECK(cudaMemset(destination.data(), 0, bytes));
    DUET_CUDA_CHECK(cudaDeviceSynchronize());

    StreamTimer timer;
    const double seconds = best_seconds(timer, [&] {
        DUET_CUDA_CHECK(cudaMemcpyAsync(destination.data(), source.data(), bytes,
                                        cudaMemcpyDeviceToDevice, timer.stream()));
    });
    return 2.0 * double(bytes) / seconds / 1e9;
}

double measure_device_read_bandwidth_gbs(size_t bytes) {
    const int64_t count = static_cast<int64_t>(bytes / sizeof(uint4));
    require(count > 0, "read bandwidth measurement needs at least 16 bytes, got ", bytes);
    const size_t read_bytes = size_t(count) * sizeof(uint4);
    DeviceBuffer data(read_bytes);
    DeviceBuffer sink(sizeof(unsigned int));
    DUET_CUDA_CHECK(cudaMemset(data.data(), 0x5A, read_bytes));
    DUET_CUDA_CHECK(cudaMemset(sink.data(), 0, sizeof(unsigned int)));
    DUET_CUDA_CHECK(cudaDeviceSynchronize());

    const int blocks = resident_read_blocks();
    StreamTimer timer;
    const double seconds = best_seconds(timer, [&] {
        read_all_kernel<<<blocks, kReadThreadsPerBlock, 0, timer.stream()>>>(
            data.as<const uint4>(), count, sink.as<unsigned int>());
        DUET_CUDA_CHECK_LAUNCH("read_all_kernel");
    });
    return double(read_bytes) / seconds / 1e9;
}

}  // namespace duet::cuda
