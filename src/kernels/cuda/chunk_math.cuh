// Pieces the chunked prompt kernels share (delta_rule_chunked.cu, ssm_scan_chunked.cu): a chunk's
// running sum of decays and a four-term dot product. Needs nvcc.
#pragma once

#include "kernels/cuda/device_math.cuh"

namespace duet::cuda {

// values[0 .. 2·32) replaced by their running sums, by one whole warp (a lane the two halves' entries).
__device__ __forceinline__ void warp_running_sum_64(float* values) {
    const int lane = threadIdx.x % kWarpSize;
    float low = values[lane], high = values[lane + kWarpSize];
#pragma unroll
    for (int offset = 1; offset < kWarpSize; offset *= 2) {
        const float l = __shfl_up_sync(0xFFFFFFFFu, low, offset), u = __shfl_up_sync(0xFFFFFFFFu, high, offset);
        if (lane >= offset) low += l, high += u;
    }
    high += __shfl_sync(0xFFFFFFFFu, low, kWarpSize - 1);
    values[lane] = low;
    values[lane + kWarpSize] = high;
}

__device__ __forceinline__ float dot4(float4 x, float4 y, float acc) {
    return fmaf(x.w, y.w, fmaf(x.z, y.z, fmaf(x.y, y.y, fmaf(x.x, y.x, acc))));
}

}  // namespace duet::cuda
