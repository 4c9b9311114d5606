// A long prompt's expert slots grouped by expert on the device (see group_slots_by_expert in ops.h),
// so that the routing never travels to the host and back between the gate and the experts. One
// block: the experts' counts by shared-memory atomics, their row and tile offsets by one block scan,
// then the slots placed in slot order by one warp, 32 at a time: the rows an expert's slots get are
// in the order of the slots, as a sequential pass would give them.
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kMaxExperts = kThreads;  // one expert a thread in the scan

// Inclusive sums over the block of (a, b), every thread of the block calling; `warp_totals` holds
// 2 · 32 ints.
__device__ int2 block_inclusive_sums(int a, int b, int* warp_totals) {
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    warp_inclusive_sums(a, b);
    if (lane == kWarpSize - 1) {
        warp_totals[2 * warp] = a;
        warp_totals[2 * warp + 1] = b;
    }
    __syncthreads();
    for (int w = 0; w < warp; ++w) {
        a += warp_totals[2 * w];
        b += warp_totals[2 * w + 1];
    }
    return make_int2(a, b);
}

__global__ void __launch_bounds__(kThreads) group_slots_kernel(const int32_t* chosen, int slots, int k, int experts,
                                                               ExpertGroupsOnDevice out) {
    __shared__ int count[kMaxExperts];
    __shared__ int next_row[kMaxExperts];
    __shared__ int warp_totals[2 * kThreads / kWarpSize];
    for (int e = threadIdx.x; e < experts; e += kThreads) count[e] = 0;
    __syncthreads();
    for (int s = threadIdx.x; s < slots; s += kThreads) {
        const int e = chosen[s];
        // The routing kernels only choose real experts; anything else is a broken invariant, not input.
        if (e < 0 || e >= experts) __trap();
        atomicAdd(&count[e], 1);
    }
    __syncthreads();

    const int e = threadIdx.x;
    const int rows = e < experts ? count[e] : 0;
    const int tiles = (rows + kExpertTileRows - 1) / kExpertTileRows;
    const int2 end = block_inclusive_sums(rows, tiles, warp_totals);
    const int first_row = end.x - rows, first_tile = end.y - tiles;
    if (e < experts) next_row[e] = first_row;
    for (int t = 0; t < tiles; ++t) {
        const int row = first_row + t * kExpertTileRows;
        out.tiles[first_tile + t] = ExpertRowTile{e, row, min(kExpertTileRows, first_row + rows - row)};
    }
    if (e == kThreads - 1) *out.tile_count = end.y;
    __syncthreads();

    if (threadIdx.x >= kWarpSize) return;
    const int lane = threadIdx.x;
    const unsigned below = (1u << lane) - 1u;
    for (int s0 = 0; s0 < slots; s0 += kWarpSize) {
        const int s = s0 + lane;
        const bool real = s < slots;
        const unsigned active = __ballot_sync(0xFFFFFFFFu, real);
        if (real) {
            const int expert = chosen[s];
            const unsigned peers = __match_any_sync(active, expert);
            const int leader = __ffs(peers) - 1;
            int base = 0;
            if (lane == leader) base = next_row[expert];
            base = __shfl_sync(active, base, leader);
            const int row = base + __popc(peers & below);
            out.row_of_slot[s] = row;
            out.token_of_row[row] = s / k;
            if (lane == leader) next_row[expert] = base + __popc(peers);
        }
        __syncwarp();
    }
}

}  // namespace

int64_t max_expert_row_tiles(int64_t slots, int64_t experts) {
    // Each expert's last tile may be part-filled: at most one tile an expert beyond the full ones.
    return slots / kExpertTileRows + std::min(slots, experts);
}

void group_slots_by_expert(const int32_t* chosen, int64_t slots, int64_t k, int64_t experts,
                           const ExpertGroupsOnDevice& out, cudaStream_t stream) {
    require(experts <= kMaxExperts && slots <= INT32_MAX && k > 0,
            "expert grouping: ", slots, " slots over ", experts, " experts exceed the GPU grouping's ", kMaxExperts,
            " experts");
    group_slots_kernel<<<1, kThreads, 0, stream>>>(chosen, static_cast<int>(slots), static_cast<int>(k),
                                                   static_cast<int>(experts), out);
    DUET_CUDA_CHECK_LAUNCH("group_slots_kernel");
}

}  // namespace duet::cuda
