// The machine's memory bandwidth, measured: the ceiling that decode speed is
// reported against, since a matrix-vector product reads every weight once.
#pragma once

#include <cstddef>

#include "base/thread_pool.h"

namespace duet::cpu {

struct BandwidthResult {
    double read_gbs = 0;  // 1e9 bytes per second read
    double copy_gbs = 0;  // bytes read plus bytes written, per second, while copying
};

// Times a parallel read of a `bytes` buffer, and a parallel copy of one half
// of it into the other, on the pool's threads (the caller's thread only when
// pool is null); best of several runs. `bytes` should be far larger than the
// caches.
BandwidthResult measure_memory_bandwidth(ThreadPool* pool, size_t bytes = size_t{1} << 30);

}  // namespace duet::cpu
