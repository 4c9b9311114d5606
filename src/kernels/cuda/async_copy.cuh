// Ampere's asynchronous global-to-shared copies (cp.async): a thread asks for 16 or 4 bytes to be
// copied into shared memory and goes on; commit groups gather its copies, and it waits for all but
// the latest few groups. Needs nvcc.
#pragma once

namespace duet::cuda {

// Asynchronous global-to-shared copies: 16 bytes (both addresses 16-byte aligned) or 4, in commit
// groups a thread waits for. Before sm_80 they are plain copies, done when issued.
__device__ __forceinline__ void copy_async_16(float* shared, const float* global) {
#if __CUDA_ARCH__ >= 800
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(global) : "memory");
#else
    *reinterpret_cast<float4*>(shared) = *reinterpret_cast<const float4*>(global);
#endif
}
__device__ __forceinline__ void copy_async_4(float* shared, const float* global) {
#if __CUDA_ARCH__ >= 800
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(to), "l"(global) : "memory");
#else
    *shared = *global;
#endif
}
__device__ __forceinline__ void copy_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int Pending>
__device__ __forceinline__ void copy_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

}  // namespace duet::cuda
