// How many blocks of a kernel the current device holds at once. A launch of no more blocks runs in
// one wave; a kernel that loops over its work sizes its grid by it. Host-only header.
#pragma once

#include <cstddef>

namespace duet::cuda {

// The current device's multiprocessors.
int current_device_multiprocessors();

// The most dynamic shared memory a block of `kernel` may opt in to on the current device: the
// device's per-block limit less the kernel's own static shared memory.
size_t max_dynamic_shared_bytes(const void* kernel);
// Lets blocks of `kernel` take `bytes` of dynamic shared memory; false (and nothing set) where the
// device cannot give a block that much.
bool allow_dynamic_shared_bytes(const void* kernel, size_t bytes);

// Blocks of `kernel` (`threads` a block, `shared_bytes` of dynamic shared memory) resident at once on
// the current device; 0 when none fits. Kept per device and kernel after the first query, so that
// launches on a decode step's path pay nothing for it (attributes set on the kernel later, such as
// its shared memory limit, are not seen).
int resident_blocks(const void* kernel, int threads, size_t shared_bytes);

template <typename... Params>
int resident_blocks(void (*kernel)(Params...), int threads, size_t shared_bytes = 0) {
    return resident_blocks(reinterpret_cast<const void*>(kernel), threads, shared_bytes);
}

// Lets `kernel` launch in clusters of `cluster_blocks` blocks: a size above the portable 8 must be
// allowed on the kernel first (Hopper places up to 16). False where the device refuses; set once a
// device and kernel, so that launches on a decode step's path pay nothing for it.
bool allow_cluster_blocks(const void* kernel, int cluster_blocks);

// Clusters of `cluster_blocks` blocks of `kernel` (one-dimensional) resident at once on the current
// device, kept as resident_blocks is; 0 when none fits, the device runs no clusters or refuses the
// size (allow_cluster_blocks).
int resident_clusters(const void* kernel, int cluster_blocks, int threads, size_t shared_bytes);

template <typename... Params>
int resident_clusters(void (*kernel)(Params...), int cluster_blocks, int threads, size_t shared_bytes = 0) {
    return resident_clusters(reinterpret_cast<const void*>(kernel), cluster_blocks, threads, shared_bytes);
}

}  // namespace duet::cuda
