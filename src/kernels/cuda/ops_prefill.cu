// Conversions feeding the tensor-core products of long prompts: f32 activations split into a bf16
// pair hi + lo (hi = x rounded to bf16, lo = the remainder rounded to bf16), so that two bf16
// products with f32 accumulation reproduce the f32 product to about 16 bits, and the same after
// the experts' activations. Rows may be gathered, for experts that see only some tokens.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t count) { return static_cast<int>((count + kThreads - 1) / kThreads); }

// Round to nearest even, as the CPU's f32_to_bf16 does for finite values.
__device__ __forceinline__ uint16_t to_bf16(float x) {
    const uint32_t bits = __float_as_uint(x);
    return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ void split(float x, uint16_t* hi, uint16_t* lo, int64_t i) {
    const uint16_t h = to_bf16(x);
    hi[i] = h;
    lo[i] = to_bf16(x - bf16_bits_to_float(h));
}

__global__ void split_rows_kernel(const float* x, int64_t cols, const int32_t* row_of, int64_t rows, uint16_t* hi,
                                  uint16_t* lo) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    const int64_t r = i / cols, c = i % cols;
    const int64_t source = row_of != nullptr ? row_of[r] : r;
    split(x[source * cols + c], hi, lo, i);
}

__global__ void relu2_split_kernel(const float* x, int64_t count, uint16_t* hi, uint16_t* lo) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const float r = fmaxf(x[i], 0.0f);
    split(r * r, hi, lo, i);
}

__global__ void silu_mul_split_kernel(const float* gate, const float* up, int64_t count, uint16_t* hi, uint16_t* lo) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) split(silu(gate[i]) * up[i], hi, lo, i);
}

}  // namespace

void split_rows_bf16(const float* x, int64_t cols, const int32_t* row_of, int64_t rows, uint16_t* hi, uint16_t* lo,
                     cudaStream_t stream) {
    if (rows * cols == 0) return;
    split_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(x, cols, row_of, rows, hi, lo);
    DUET_CUDA_CHECK_LAUNCH("split_rows_kernel");
}

void relu2_split_bf16(const float* x, int64_t count, uint16_t* hi, uint16_t* lo, cudaStream_t stream) {
    if (count == 0) return;
    relu2_split_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, count, hi, lo);
    DUET_CUDA_CHECK_LAUNCH("relu2_split_kernel");
}

void silu_mul_split_bf16(const float* gate, const float* up, int64_t count, uint16_t* hi, uint16_t* lo,
                         cudaStream_t stream) {
    if (count == 0) return;
    silu_mul_split_kernel<<<blocks_for(count), kThreads, 0, stream>>>(gate, up, count, hi, lo);
    DUET_CUDA_CHECK_LAUNCH("silu_mul_split_kernel");
}

}  // namespace duet::cuda
