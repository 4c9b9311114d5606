#include "kernels/cuda/speech_encoder_kernels.h"

#include <cfloat>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"

namespace duet::cuda::speech {

namespace {

constexpr int kMaxHeadDim = 1024;
constexpr int kSoftmaxThreads = 256;

// Block (token t, head h of q or of k): thread i holds value i of the head.
__global__ void head_norm_rope_rows_kernel(HeadNormRopeRows a) {
    __shared__ float values[kMaxHeadDim];
    __shared__ float shared[kWarpSize];
    const int64_t t = blockIdx.x, part = blockIdx.y / a.heads, h = blockIdx.y % a.heads;
    const int64_t hd = a.head_dim, i = threadIdx.x;
    float* head = a.qkv + t * 3 * a.width + part * a.width + h * hd;
    float v = i < hd ? head[i] : 0.0f;
    const float* weight = part == 0 ? a.q_weight : a.k_weight;
    const float* bias = part == 0 ? a.q_bias : a.k_bias;
    if (weight != nullptr) {
        const float mean = block_sum(v, shared) / static_cast<float>(hd);
        const float d = i < hd ? v - mean : 0.0f;
        const float inv_std = rsqrtf(block_sum(d * d, shared) / static_cast<float>(hd) + a.eps);
        if (i < hd) v = d * inv_std * weight[i] + bias[i];
    }
    if (i < hd) values[i] = v;
    __syncthreads();
    const int64_t half = a.rotary_dim / 2;
    if (i < half) {
        const float c = a.cos[t * half + i], s = a.sin[t * half + i];
        const float x1 = values[i], x2 = values[i + half];
        head[i] = x1 * c - x2 * s;
        head[i + half] = x2 * c + x1 * s;
    } else if (i >= a.rotary_dim && i < hd) {
        head[i] = values[i];
    }
}

// One block a row.
__global__ void __launch_bounds__(kSoftmaxThreads) softmax_rows_kernel(float* x, int64_t count) {
    __shared__ float shared[kWarpSize];
    float* row = x + blockIdx.x * count;
    float best = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) best = fmaxf(best, row[j]);
    best = block_max(best, shared);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
        const float e = expf(row[j] - best);
        row[j] = e;
        sum += e;
    }
    const float inv = 1.0f / block_sum(sum, shared);
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) row[j] *= inv;
}

}  // namespace

void head_norm_rope_rows(const HeadNormRopeRows& a, cudaStream_t stream) {
    require(a.head_dim >= 1 && a.head_dim <= kMaxHeadDim && a.rotary_dim % 2 == 0 && a.rotary_dim <= a.head_dim &&
                a.width == a.heads * a.head_dim,
            "speech encoder: heads of ", a.head_dim, " values (at most ", kMaxHeadDim, "), rotary_dim ", a.rotary_dim,
            " even and within the head");
    if (a.n == 0) return;
    const unsigned threads = static_cast<unsigned>((a.head_dim + kWarpSize - 1) / kWarpSize * kWarpSize);
    head_norm_rope_rows_kernel<<<dim3(static_cast<unsigned>(a.n), static_cast<unsigned>(2 * a.heads)), threads, 0,
                                 stream>>>(a);
    DUET_CUDA_CHECK_LAUNCH("head_norm_rope_rows_kernel");
}

void softmax_rows(float* x, int64_t rows, int64_t count, cudaStream_t stream) {
    if (rows == 0 || count == 0) return;
    softmax_rows_kernel<<<static_cast<unsigned>(rows), kSoftmaxThreads, 0, stream>>>(x, count);
    DUET_CUDA_CHECK_LAUNCH("softmax_rows_kernel");
}

}  // namespace duet::cuda::speech
