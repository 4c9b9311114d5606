// Memory-bound bf16 matvec: each weight is read exactly once, so the kernel
// is about keeping enough wide loads in flight. One warp owns one row; lanes
// stride across the row, and a warp shuffle sums their partial results.

#include "kernels/cuda/matvec_bf16.h"

#include <cstdint>
#include <limits>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"

namespace duet::cuda {

namespace {

// Launch shape, chosen by measurement on an H200 (rows × cols from 2688 × 1856
// to 131072 × 2688): small blocks, 8 resident per SM, each lane with four
// 16-byte loads in flight. Larger blocks leave a bigger partial last wave;
// more residency forces the registers below 64 and costs more than it gains.
constexpr int kWarpsPerBlock = 4;
constexpr int kThreadsPerBlock = kWarpsPerBlock * kWarpSize;
constexpr int kMinBlocksPerSm = 8;

// Vector path: rows are `chunks` groups of 8 bf16, i.e. 16 bytes each.
__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSm)
    matvec_bf16_vec8_kernel(const uint4* __restrict__ w, const float4* __restrict__ x,
                            float* __restrict__ y, int64_t rows, int64_t chunks) {
    const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
    // The whole warp leaves together, so the shuffles inside see all 32 lanes.
    if (row >= rows) return;
    const float sum = warp_row_dot_bf16x8<true>(w + row * chunks, x, chunks);
    allow_next_kernel();
    if (threadIdx.x % kWarpSize == 0) y[row] = sum;
}

// Scalar path for odd widths and unaligned pointers (e.g. views into a
// packed tensor). Lanes still read consecutive elements, so loads coalesce.
__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSm)
    matvec_bf16_scalar_kernel(const uint16_t* __restrict__ w, const float* __restrict__ x,
                              float* __restrict__ y, int64_t rows, int64_t cols) {
    const int lane = threadIdx.x % kWarpSize;
    const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
    if (row >= rows) return;

    const uint16_t* w_row = w + row * cols;
    float acc = 0.0f;
    for (int64_t c = lane; c < cols; c += kWarpSize) {
        acc = fmaf(bf16_bits_to_float(w_row[c]), __ldg(x + c), acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) y[row] = acc;
}

bool is_aligned_16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void matvec_bf16(const uint16_t* w, const float* x, float* y, int64_t rows, int64_t cols,
                 cudaStream_t stream) {
    require(rows >= 0 && cols >= 0, "matvec_bf16: negative shape [", rows, ", ", cols, "]");
    if (rows == 0) return;
    require(y != nullptr, "matvec_bf16: null output pointer");
    require(cols == 0 || (w != nullptr && x != nullptr), "matvec_bf16: null input pointer");

    const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    require(blocks <= std::numeric_limits<int>::max(), "matvec_bf16: ", rows,
            " rows exceed the grid limit");
    const dim3 grid(static_cast<unsigned>(blocks));
    const dim3 block(kThreadsPerBlock);

    if (cols % 8 == 0 && is_aligned_16(w) && is_aligned_16(x)) {
        launch_early(matvec_bf16_vec8_kernel, grid, block, 0, stream, "matvec_bf16_vec8_kernel",
                     reinterpret_cast<const uint4*>(w), reinterpret_cast<const float4*>(x), y, rows, cols / 8);
    } else {
        matvec_bf16_scalar_kernel<<<grid, block, 0, stream>>>(w, x, y, rows, cols);
        DUET_CUDA_CHECK_LAUNCH("matvec_bf16_scalar_kernel");
    }
}

}  // namespace duet::cuda
