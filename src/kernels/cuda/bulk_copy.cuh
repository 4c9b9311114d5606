// Hopper's bulk copies (the tensor memory accelerator's one-dimensional form): one thread asks for a
// run of global memory to be copied into shared memory, and the block waits for it on a shared
// memory barrier that counts the bytes in. No registers are held while the bytes travel, so a block
// can have far more in flight than its lanes' loads could. Needs nvcc and compute capability 9.0
// (elsewhere these compile to nothing; callers check the device first).
#pragma once

#include <cstdint>

namespace duet::cuda {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Sets up a barrier that `arrivals` arrivals complete (a bulk copy's, or barrier_arrive's as a ring's
// "stage free" signal). Call from one thread, then make it visible to the block (a __syncthreads)
// before anyone waits on it.
__device__ __forceinline__ void arrivals_barrier_init(uint64_t* barrier, unsigned arrivals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)), "r"(arrivals) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// A barrier that one arrival (with its expected bytes, bulk_copy_to_shared) completes.
__device__ __forceinline__ void bulk_barrier_init(uint64_t* barrier) { arrivals_barrier_init(barrier, 1); }

// One arrival on a barrier set up by arrivals_barrier_init (release: the arriving thread's reads of
// the stage are done before a waiter refills it).
__device__ __forceinline__ void barrier_arrive(uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(barrier)) : "memory");
#endif
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global `from` into shared
// `to`; the barrier's current phase completes once they have all arrived. One thread a phase.
__device__ __forceinline__ void bulk_copy_to_shared(void* to, const void* from, uint32_t bytes, uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)), "r"(bytes)
                 : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            shared_address(to)),
        "l"(from), "r"(bytes), "r"(shared_address(barrier))
        : "memory");
#endif
}

// Waits until the barrier's phase of the given parity (0 for its first, 1 for its second, …) completes.
__device__ __forceinline__ void bulk_wait(uint64_t* barrier, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "wait_again:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait_again;\n"
        "}\n" ::"r"(shared_address(barrier)),
        "r"(parity)
        : "memory");
#endif
}

}  // namespace duet::cuda
