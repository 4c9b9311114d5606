#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_check.h"

namespace duet::cuda {

namespace {

// Status codes that mean "this machine has no CUDA": no device, no driver
// (libcuda missing or too old) or only the link-time stub of it. Any other
// failure is a broken installation and is reported.
bool means_no_cuda(cudaError_t status) {
    return status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver ||
           status == cudaErrorStubLibrary;
}

int attribute_or_zero(cudaDeviceAttr attribute, int device) {
    int value = 0;
    if (cudaDeviceGetAttribute(&value, attribute, device) != cudaSuccess) {
        cudaGetLastError();  // the attribute is optional; do not leave the error pending
        return 0;
    }
    return value;
}

}  // namespace

int device_count() {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status == cudaSuccess) return count;
    cudaGetLastError();
    if (means_no_cuda(status)) return 0;
    throw_cuda_error(status, "cudaGetDeviceCount(&count)", __FILE__, __LINE__);
}

DeviceInfo device_info(int index) {
    int count = device_count();
    require(index >= 0 && index < count, "CUDA device index ", index, " is out of range (",
            count, " device(s) present)");

    cudaDeviceProp props{};
    DUET_CUDA_CHECK(cudaGetDeviceProperties(&props, index));

    DeviceInfo info;
    info.index = index;
    info.name = props.name;
    info.sm_major = props.major;
    info.sm_minor = props.minor;
    info.total_bytes = props.totalGlobalMem;
    info.multiprocessors = props.multiProcessorCount;

    // The memory clock left cudaDeviceProp in CUDA 13, so it is read as an
    // attribute. DRAM transfers on both clock edges, hence the factor 2.
    int memory_clock_khz = attribute_or_zero(cudaDevAttrMemoryClockRate, index);
    int bus_width_bits = attribute_or_zero(cudaDevAttrGlobalMemoryBusWidth, index);
    if (memory_clock_khz > 0 && bus_width_bits > 0) {
        info.peak_bandwidth_gbs =
            2.0 * double(memory_clock_khz) * 1e3 * (double(bus_width_bits) / 8.0) / 1e9;
    }
    return info;
}

}  // namespace duet::cuda

namespace duet::cuda {

namespace {

// Whether the current device has compute capability 9.0 or later (Hopper's launch features).
bool current_device_is_sm90_or_later() {
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
    return major >= 9;
}

}  // namespace

bool early_launch_available() {
    // DUET_CUDA_EARLY_LAUNCH=0 turns it off, to measure what it brings.
    static const bool available = [] {
        const char* setting = std::getenv("DUET_CUDA_EARLY_LAUNCH");
        if (setting != nullptr && std::string(setting) == "0") return false;
        return current_device_is_sm90_or_later();
    }();
    return available;
}

bool thread_block_clusters_available() {
    static const bool available = current_device_is_sm90_or_later();
    return available;
}

bool bulk_copies_available() {
    static const bool available = current_device_is_sm90_or_later();
    return available;
}

}  // namespace duet::cuda
