// Hopper's programmatic dependent launch: a kernel launched "early" may start while the kernel
// before it on the stream is still finishing, and waits inside (wait_for_inputs) only before it
// touches memory that earlier work writes or reads. Work that needs nothing from before, such as
// loading a matrix's weights, overlaps the previous kernel's tail; in a recorded decode step that
// hides most of the gap between hundreds of small kernels. Needs nvcc.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/cuda_check.h"

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

// Launches `kernel` early where the device allows it, plainly otherwise. The kernel must call
// wait_for_inputs() before its first access to memory that earlier work touches.
template <typename... Params, typename... Args>
void launch_early(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                  const char* name, Args&&... args) {
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    if (early_launch_available()) {
        config.attrs = &attribute;
        config.numAttrs = 1;
    }
    check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name, __FILE__, __LINE__);
}

}  // namespace duet::cuda
