// The two sides of a prepared norm (norm_ahead.h) inside kernels. Needs nvcc.
#pragma once

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/norm_ahead.h"

namespace duet::cuda {

// The writer's side, called by every lane of a warp once the warp's rows of the stream are final:
// a lane that `owns` row `row` gives its new value and the norm's weight for the row (loaded before
// the kernel's wait). The warp's squares go into one partial sum, chosen by the warp's number in
// warp-major order (a kernel whose blocks report from one warp still spreads its atomics over all).
// The sums are doubles, so that the order in which the warps arrive changes the float the reader
// gets only when their total lies within a double's rounding of a float's.
__device__ __forceinline__ void write_norm_ahead(const NormAhead& ahead, bool owns, int64_t row, float value,
                                                 float weight) {
    static_assert(kNormAheadSums == kWarpSize, "a warp's lanes read the partial sums");
    float square = 0.0f;
    if (owns) {
        ahead.weighted[row] = value * weight;
        square = value * value;
    }
    square = warp_sum(square);
    if (threadIdx.x % kWarpSize == 0 && square != 0.0f) {
        const unsigned warp = threadIdx.x / kWarpSize * gridDim.x + blockIdx.x;
        atomicAdd(ahead.sums + warp % kNormAheadSums * kNormAheadSumStride, double(square));
    }
}

// The reader's side, after its wait, by every lane of a warp: 1 / rms of the stream of `cols` values.
// Called before the rows' dots: asked for after them (the load before, the sum after, so that its
// trip to memory overlapped the rows' loads) it cost a product kernel registers it did not have (a
// decode step 0.04 ms slower on an H200). The sums are read through L1, as x is: nothing of them was
// cached by the kernel before its wait, and every warp of a launch reads the same 32 lines (read past
// L1, they made a hot spot in L2).
__device__ __forceinline__ float norm_ahead_inv_rms(const NormAhead& ahead, int64_t cols, float eps) {
    const double total = warp_sum(__ldg(ahead.sums + threadIdx.x % kWarpSize * kNormAheadSumStride));
    return rsqrtf(float(total / double(cols)) + eps);
}

}  // namespace duet::cuda
