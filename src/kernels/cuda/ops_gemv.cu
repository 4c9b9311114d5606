// Matrix products for few tokens: one warp per weight row, lanes striding across the row, each
// weight read once for up to kTokens tokens; and the mixture-of-experts form, where each slot picks
// its expert's matrix, so all chosen experts run in one launch.
#include "kernels/cuda/alignment.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kTokens = 8;

template <typename W>
__device__ __forceinline__ float widen(W w);
template <>
__device__ __forceinline__ float widen<uint16_t>(uint16_t w) { return bf16_bits_to_float(w); }
template <>
__device__ __forceinline__ float widen<float>(float w) { return w; }

// out[t, row] for t < n (n ≤ kTokens): the row of `w` against each token's x.
template <typename W>
__device__ __forceinline__ void row_dots(const W* __restrict__ w_row, const float* __restrict__ x, int64_t cols,
                                         int n, float* __restrict__ out, int64_t out_stride) {
    const int lane = threadIdx.x % kWarpSize;
    float acc[kTokens] = {};
    for (int64_t c = lane; c < cols; c += kWarpSize) {
        const float wv = widen(__ldcs(w_row + c));
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
            if (t < n) acc[t] = fmaf(wv, __ldg(x + t * cols + c), acc[t]);
        }
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
        if (t < n) {
            const float sum = warp_sum(acc[t]);
            if (lane == 0) out[t * out_stride] = sum;
        }
    }
}

template <typename W>
__global__ void gemv_rows_kernel(const W* __restrict__ w, int64_t rows, int64_t cols, const float* __restrict__ x,
                                 int n, float* __restrict__ out) {
    const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
    if (row >= rows) return;
    row_dots(w + row * cols, x, cols, n, out + row, rows);
}

// bf16 experts with rows of whole 16-byte groups and aligned inputs: the vector path, kLanes lanes a
// row (see RowDot). Without expert_of every slot uses experts[0]. With `relu2` the outputs are
// max(v, 0)².
template <bool kRelu2, int kLanes>
__global__ void expert_gemv_bf16x8_kernel(const void* const* __restrict__ experts, int64_t rows, int64_t chunks,
                                          const int32_t* __restrict__ expert_of, const float* __restrict__ x,
                                          int64_t slots_per_input, float* __restrict__ out) {
    const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
    const int64_t slot = blockIdx.y;
    const bool active = row < rows;
    wait_for_inputs();  // the expert is chosen by the kernel before
    const int expert = expert_of != nullptr ? expert_of[slot] : 0;
    RowDot<kLanes> dot;
    dot.start(static_cast<const uint4*>(experts[expert]) + (active ? row : 0) * chunks, active ? chunks : 0);
    const float4* xs = reinterpret_cast<const float4*>(x + (slot / slots_per_input) * chunks * 8);
    float sum = dot.finish(PlainInput{xs});
    if (kRelu2) {
        sum = fmaxf(sum, 0.0f);
        sum *= sum;
    }
    if (active && threadIdx.x % kLanes == 0) out[slot * rows + row] = sum;
}

// The SwiGLU half of an expert in one pass: silu(gate_row · x) · (up_row · x), both rows requested
// before either is summed, so twice the loads are in flight.
template <int kLanes>
__global__ void expert_swiglu_bf16x8_kernel(const void* const* __restrict__ gates, const void* const* __restrict__ ups,
                                            int64_t rows, int64_t chunks, const int32_t* __restrict__ expert_of,
                                            const float* __restrict__ x, int64_t slots_per_input,
                                            float* __restrict__ out) {
    const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
    const int64_t slot = blockIdx.y;
    const bool active = row < rows;
    wait_for_inputs();
    const int expert = expert_of != nullptr ? expert_of[slot] : 0;
    const int64_t offset = (active ? row : 0) * chunks, count = active ? chunks : 0;
    RowDot<kLanes> gate, up;
    gate.start(static_cast<const uint4*>(gates[expert]) + offset, count);
    up.start(static_cast<const uint4*>(ups[expert]) + offset, count);
    const PlainInput input{reinterpret_cast<const float4*>(x + (slot / slots_per_input) * chunks * 8)};
    const float g = gate.finish(input);
    const float u = up.finish(input);
    if (active && threadIdx.x % kLanes == 0) out[slot * rows + row] = silu(g) * u;
}

template <typename W>
__global__ void expert_gemv_kernel(const void* const* __restrict__ experts, int64_t rows, int64_t cols,
                                   const int32_t* __restrict__ expert_of, const float* __restrict__ x,
                                   int64_t slots_per_input, float* __restrict__ out) {
    const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
    const int64_t slot = blockIdx.y;
    if (row >= rows) return;
    const W* w = static_cast<const W*>(experts[expert_of != nullptr ? expert_of[slot] : 0]);
    row_dots(w + row * cols, x + (slot / slots_per_input) * cols, cols, 1, out + slot * rows + row, rows);
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

}  // namespace

void gemv_rows(const void* w, WeightType type, int64_t rows, int64_t cols, const float* x, int64_t n, float* out,
               cudaStream_t stream) {
    for (int64_t t0 = 0; t0 < n; t0 += kTokens) {
        const int count = static_cast<int>(std::min<int64_t>(kTokens, n - t0));
        const float* xs = x + t0 * cols;
        float* outs = out + t0 * rows;
        if (type == WeightType::BF16) {
            gemv_rows_kernel<uint16_t><<<row_blocks(rows), kWarpsPerBlock * kWarpSize, 0, stream>>>(
                static_cast<const uint16_t*>(w), rows, cols, xs, count, outs);
        } else {
            gemv_rows_kernel<float><<<row_blocks(rows), kWarpsPerBlock * kWarpSize, 0, stream>>>(
                static_cast<const float*>(w), rows, cols, xs, count, outs);
        }
        DUET_CUDA_CHECK_LAUNCH("gemv_rows_kernel");
    }
}

namespace {

bool vector_path(WeightType type, int64_t cols, const float* x) {
    // Device copies of weights are 256-byte aligned; inputs are rows of a scratch buffer.
    return type == WeightType::BF16 && cols % 8 == 0 && aligned_16(x);
}

}  // namespace

// Grid of a vector-path expert launch: kLanes lanes a row, kWarpsPerBlock warps a block.
template <int kLanes>
dim3 expert_grid(int64_t rows, int64_t slots) {
    constexpr int64_t kRowsPerBlock = kWarpsPerBlock * kWarpSize / kLanes;
    return dim3(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), static_cast<unsigned>(slots));
}

template <int kLanes>
void launch_expert_gemv(const void* const* experts, int64_t rows, int64_t chunks, const int32_t* expert_of,
                        const float* x, int64_t slots_per_input, int64_t slots, float* out, bool relu2_out,
                        cudaStream_t stream) {
    launch_early(relu2_out ? expert_gemv_bf16x8_kernel<true, kLanes> : expert_gemv_bf16x8_kernel<false, kLanes>,
                 expert_grid<kLanes>(rows, slots), dim3(kWarpsPerBlock * kWarpSize), 0, stream,
                 "expert_gemv_bf16x8_kernel", experts, rows, chunks, expert_of, x, slots_per_input, out);
}

template <int kLanes>
void launch_expert_swiglu(const void* const* gates, const void* const* ups, int64_t rows, int64_t chunks,
                          const int32_t* expert_of, const float* x, int64_t slots_per_input, int64_t slots, float* out,
                          cudaStream_t stream) {
    launch_early(expert_swiglu_bf16x8_kernel<kLanes>, expert_grid<kLanes>(rows, slots),
                 dim3(kWarpsPerBlock * kWarpSize), 0, stream, "expert_swiglu_bf16x8_kernel", gates, ups, rows, chunks,
                 expert_of, x, slots_per_input, out);
}

void expert_gemv(const void* const* experts, WeightType type, int64_t rows, int64_t cols, const int32_t* expert_of,
                 const float* x, int64_t slots_per_input, int64_t slots, float* out, cudaStream_t stream,
                 bool relu2_out) {
    if (slots == 0 || rows == 0) return;
    require(slots <= 65535, "expert_gemv: ", slots, " token-expert pairs exceed one launch's 65535");
    if (vector_path(type, cols, x)) {
        const int64_t chunks = cols / 8;
        switch (row_lanes(chunks)) {
            case 32: launch_expert_gemv<32>(experts, rows, chunks, expert_of, x, slots_per_input, slots, out, relu2_out,
                                           stream);
                break;
            case 16: launch_expert_gemv<16>(experts, rows, chunks, expert_of, x, slots_per_input, slots, out, relu2_out,
                                           stream);
                break;
            default:
                launch_expert_gemv<8>(experts, rows, chunks, expert_of, x, slots_per_input, slots, out, relu2_out,
                                      stream);
                break;
        }
        return;
    }
    const dim3 grid(row_blocks(rows), static_cast<unsigned>(slots));
    if (type == WeightType::BF16) {
        expert_gemv_kernel<uint16_t><<<grid, kWarpsPerBlock * kWarpSize, 0, stream>>>(experts, rows, cols, expert_of,
                                                                                      x, slots_per_input, out);
    } else {
        expert_gemv_kernel<float><<<grid, kWarpsPerBlock * kWarpSize, 0, stream>>>(experts, rows, cols, expert_of, x,
                                                                                   slots_per_input, out);
    }
    DUET_CUDA_CHECK_LAUNCH("expert_gemv_kernel");
    if (relu2_out) relu2(out, slots * rows, stream);
}

bool expert_swiglu(const void* const* gates, const void* const* ups, WeightType type, int64_t rows, int64_t cols,
                   const int32_t* expert_of, const float* x, int64_t slots_per_input, int64_t slots, float* out,
                   cudaStream_t stream) {
    if (!vector_path(type, cols, x) || slots > 65535) return false;
    if (slots == 0 || rows == 0) return true;
    const int64_t chunks = cols / 8;
    switch (row_lanes(chunks)) {
        case 32:
            launch_expert_swiglu<32>(gates, ups, rows, chunks, expert_of, x, slots_per_input, slots, out, stream);
            break;
        case 16:
            launch_expert_swiglu<16>(gates, ups, rows, chunks, expert_of, x, slots_per_input, slots, out, stream);
            break;
        default:
            launch_expert_swiglu<8>(gates, ups, rows, chunks, expert_of, x, slots_per_input, slots, out, stream);
            break;
    }
    return true;
}

}  // namespace duet::cuda
