// How finely to split a loop over the thread pool. Handing a chunk to another thread costs a few
// microseconds, so a chunk should carry at least that much arithmetic; decode steps of small models
// are otherwise slower with more threads than with one.
#pragma once

#include <algorithm>
#include <cstdint>

namespace duet::cpu {

// About 20 µs of scalar work per chunk.
constexpr int64_t kMinOpsPerChunk = 1 << 15;

// The grain (items per chunk) for items that each cost about `ops_per_item` operations.
constexpr int64_t grain_for(int64_t ops_per_item) {
    return std::max<int64_t>(1, kMinOpsPerChunk / std::max<int64_t>(1, ops_per_item));
}

}  // namespace duet::cpu
