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
    return static_cast<size_t>(limit) > attributes.sharedSizeBytes ? static_cast<size_t>(limit) - attributes.sharedSizeBytes
                                                                   : 0;
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
