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

namespace {

// A query of the current device about `kernel`'s launches, answered once a device and shape: the
// answers do not change while the program runs, and decode steps ask on their path.
template <typename Query>
int once_a_device(const void* kernel, int cluster_blocks, int threads, size_t shared_bytes, Query query) {
    int device = 0;
    DUET_CUDA_CHECK(cudaGetDevice(&device));
    using Key = std::tuple<int, const void*, int, int, size_t>;
    static std::mutex mutex;
    static std::map<Key, int> known;
    const Key key{device, kernel, cluster_blocks, threads, shared_bytes};
    const std::lock_guard<std::mutex> lock(mutex);
    const auto found = known.find(key);
    if (found != known.end()) return found->second;
    const int answer = query();
    known.emplace(key, answer);
    return answer;
}

}  // namespace

bool allow_cluster_blocks(const void* kernel, int cluster_blocks) {
    constexpr int kPortableClusterBlocks = 8;
    if (cluster_blocks <= kPortableClusterBlocks) return true;
    // Keyed apart from resident_clusters' answers by a block size no launch has.
    constexpr int kNoThreads = -1;
    return once_a_device(kernel, cluster_blocks, kNoThreads, 0, [&] {
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess) return 1;
        (void)cudaGetLastError();  // a refusal is an answer, not an error for the next call
        return 0;
    }) != 0;
}

int resident_blocks(const void* kernel, int threads, size_t shared_bytes) {
    return once_a_device(kernel, 0, threads, shared_bytes, [&] {
        int per_multiprocessor = 0;
        DUET_CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, threads, shared_bytes));
        return per_multiprocessor * current_device_multiprocessors();
    });
}

int resident_clusters(const void* kernel, int cluster_blocks, int threads, size_t shared_bytes) {
    // Before the query's own lock: allow_cluster_blocks takes it too.
    if (!allow_cluster_blocks(kernel, cluster_blocks)) return 0;
    return once_a_device(kernel, cluster_blocks, threads, shared_bytes, [&] {
        cudaLaunchConfig_t config{};
        config.gridDim = dim3(static_cast<unsigned>(cluster_blocks));
        config.blockDim = dim3(static_cast<unsigned>(threads));
        config.dynamicSmemBytes = shared_bytes;
        cudaLaunchAttribute cluster{};
        cluster.id = cudaLaunchAttributeClusterDimension;
        cluster.val.clusterDim.x = static_cast<unsigned>(cluster_blocks);
        cluster.val.clusterDim.y = 1;
        cluster.val.clusterDim.z = 1;
        config.attrs = &cluster;
        config.numAttrs = 1;
        int clusters = 0;
        if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        return clusters;
    });
}

}  // namespace duet::cuda
