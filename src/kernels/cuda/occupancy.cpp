#include "kernels/cuda/occupancy.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <tuple>

#include "kernels/cuda/cuda_check.h"

namespace duet::cuda {

int current_device_multiprocessors() {
    int device = 0, multiprocessors = 0;
    DUET_CUDA_CHECK(cudaGetDevice(&device));
    DUET_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    return multiprocessors;
}

size_t max_dynamic_shared_bytes(const void* kernel) {
    int device = 0, limit = 0;
    DUET_CUDA_CHECK(cudaGetDevice(&device));
    DUET_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaFuncAttributes attributes{};
    DUET_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
    const auto device_limit = static_cast<size_t>(limit);
    return device_limit > attributes.sharedSizeBytes ? device_limit - attributes.sharedSizeBytes : 0;
}

bool allow_dynamic_shared_bytes(const void* kernel, size_t bytes) {
    if (bytes > max_dynamic_shared_bytes(kernel)) return false;
    DUET_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    return true;
}

int resident_blocks(const void* kernel, int threads, size_t shared_bytes) {
    int device = 0;
    DUET_CUDA_CHECK(cudaGetDevice(&device));
    using Key = std::tuple<int, const void*, int, size_t>;
    static std::mutex mutex;
    static std::map<Key, int> known;
    const Key key{device, kernel, threads, shared_bytes};
    const std::lock_guard<std::mutex> lock(mutex);
    const auto found = known.find(key);
    if (found != known.end()) return found->second;
    int per_multiprocessor = 0;
    DUET_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, threads, shared_bytes));
    const int blocks = per_multiprocessor * current_device_multiprocessors();
    known.emplace(key, blocks);
    return blocks;
}

}  // namespace duet::cuda
