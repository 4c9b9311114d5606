// Hopper's programmatic dependent launch: a kernel launched "early" may start while the kernel
// before it on the stream is still finishing, and waits inside (wait_for_inputs) only before it
// touches memory that earlier work writes or reads. Work that needs nothing from before, such as
// loading a matrix's weights, overlaps the previous kernel's tail; in a recorded decode step that
// hides most of the gap between hundreds of small kernels. Needs nvcc.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/occupancy.h"

namespace duet::cuda {

// Waits until the kernels this one was launched behind have finished and their writes are visible.
// Every kernel launched early calls it before reading activations or writing anything.
__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel on the stream start launching (it still waits for this one's writes).
__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether the current device has programmatic dependent launch (compute capability 9.0 and up).
bool early_launch_available();

// Whether the current device runs thread block clusters (compute capability 9.0 and up).
bool thread_block_clusters_available();

// Whether the current device has one-dimensional bulk copies into shared memory (bulk_copy.cuh;
// compute capability 9.0 and up).
bool bulk_copies_available();

// Launches `kernel` early where the device allows it, plainly otherwise, in thread block clusters
// of `cluster_blocks` consecutive blocks along x (0: no cluster launch; clusters need compute
// capability 9.0, see thread_block_clusters_available; a size above the portable 8 is allowed on the
// kernel here). The kernel must call wait_for_inputs() before its first access to memory that earlier
// work touches.
template <typename... Params, typename... Args>
void launch_early_in_clusters(unsigned cluster_blocks, void (*kernel)(Params...), dim3 grid, dim3 block,
                              size_t shared_bytes, cudaStream_t stream, const char* name, Args&&... args) {
    if (!allow_cluster_blocks(reinterpret_cast<const void*>(kernel), static_cast<int>(cluster_blocks))) {
        fail(name, ": the device refuses clusters of ", cluster_blocks, " blocks");
    }
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    cudaLaunchAttribute attributes[2]{};
    unsigned count = 0;
    if (early_launch_available()) {
        attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attributes[count].val.programmaticStreamSerializationAllowed = 1;
        ++count;
    }
    if (cluster_blocks > 0) {
        attributes[count].id = cudaLaunchAttributeClusterDimension;
        attributes[count].val.clusterDim.x = cluster_blocks;
        attributes[count].val.clusterDim.y = 1;
        attributes[count].val.clusterDim.z = 1;
        ++count;
    }
    config.attrs = count > 0 ? attributes : nullptr;
    config.numAttrs = count;
    check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name, __FILE__, __LINE__);
}

template <typename... Params, typename... Args>
void launch_early(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                  const char* name, Args&&... args) {
    launch_early_in_clusters(0, kernel, grid, block, shared_bytes, stream, name, std::forward<Args>(args)...);
}

}  // namespace duet::cuda
