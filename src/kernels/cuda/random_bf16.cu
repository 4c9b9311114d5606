// Counter-based random fill: every element is a pure function of (key + index), so a grid-stride
// loop writes them in any order. Bound by the write bandwidth, not the hashing.

#include "kernels/cuda/random_bf16.h"

#include "base/counter_random.h"
#include "base/error.h"
#include "kernels/cuda/cuda_check.h"

namespace duet::cuda {

namespace {

constexpr int kThreadsPerBlock = 256;
// Enough blocks to fill any current GPU; the grid-stride loop covers the rest.
constexpr int64_t kMaxBlocks = 65536;

__global__ void fill_uniform_bf16_kernel(uint16_t* __restrict__ out, int64_t count, uint64_t key, float lo,
                                         float hi) {
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        out[i] = counter_random::uniform_bf16(key, static_cast<uint64_t>(i), lo, hi);
    }
}

}  // namespace

void fill_uniform_bf16(uint16_t* out, int64_t count, uint64_t key, float lo, float hi, cudaStream_t stream) {
    require(count >= 0, "fill_uniform_bf16: negative count ", count);
    if (count == 0) return;
    require(out != nullptr, "fill_uniform_bf16: null output pointer");
    int64_t blocks = (count + kThreadsPerBlock - 1) / kThreadsPerBlock;
    if (blocks > kMaxBlocks) blocks = kMaxBlocks;
    fill_uniform_bf16_kernel<<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(out, count, key, lo, hi);
    DUET_CUDA_CHECK_LAUNCH("fill_uniform_bf16_kernel");
}

}  // namespace duet::cuda
