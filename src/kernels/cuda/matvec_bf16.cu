// Memory-bound bf16 matvec: each weight is read exactly once, so the kernel
// is about keeping enough wide loads in flight. One warp owns one row; lanes
// stride across the row, and a warp shuffle sums their partial results.

#include "kernels/cuda/matvec_bf16.h"

#include <cstdint>
#include <limits>

#include "base/error.h"
#include "kernels/cuda/alignment.h"
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

// Vector path: rows are `chunks` groups of 8 bf16, i.e. 16 bytes each, kLanes lanes a row (see
// RowDot). With a norm weight the input is RMS-normalised on the fly (the row's lanes sum x² as they
// read it, see NormedInput); with `add` the result is added to y (a residual stream) instead of
// written.
template <bool kNorm, bool kAdd, int kLanes>
__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSm)
    matvec_bf16_vec8_kernel(const uint4* __restrict__ w, const float4* __restrict__ x,
                            const float4* __restrict__ norm_weight, float eps, float* __restrict__ y,
                            int64_t rows, int64_t chunks) {
    const int64_t row = (int64_t(blockIdx.x) * kThreadsPerBlock + threadIdx.x) / kLanes;
    const bool active = row < rows;
    RowDot<kLanes> dot;
    dot.start(w + (active ? row : 0) * chunks, active ? chunks : 0);
    wait_for_inputs();
    allow_next_kernel();
    float sum;
    if (kNorm) {
        NormedInput input{x, norm_weight};
        sum = dot.finish(input);
        sum *= rsqrtf(RowDot<kLanes>::group_sum(input.squares) / float(chunks * 8) + eps);
    } else {
        sum = dot.finish(PlainInput{x});
    }
    if (active && threadIdx.x % kLanes == 0) y[row] = kAdd ? y[row] + sum : sum;
}

template <int kLanes>
void launch_vec8(const uint4* w, const float4* x, const float4* norm_weight, float eps, bool add, float* y,
                 int64_t rows, int64_t chunks, cudaStream_t stream) {
    constexpr int64_t kRowsPerBlock = kThreadsPerBlock / kLanes;
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    require(blocks <= std::numeric_limits<int>::max(), "matvec_bf16: ", rows, " rows exceed the grid limit");
    const bool norm = norm_weight != nullptr;
    auto* kernel = norm ? (add ? matvec_bf16_vec8_kernel<true, true, kLanes>
                               : matvec_bf16_vec8_kernel<true, false, kLanes>)
                        : (add ? matvec_bf16_vec8_kernel<false, true, kLanes>
                               : matvec_bf16_vec8_kernel<false, false, kLanes>);
    launch_early(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreadsPerBlock), 0, stream,
                 "matvec_bf16_vec8_kernel", w, x, norm_weight, eps, y, rows, chunks);
}

// Two normalised products summed into one output row by row (matvec_bf16_normed_pair): a row's
// lanes stream both matrices' rows at once, with half the loads each in flight.
template <bool kAdd, int kLanes>
__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSm)
    matvec_bf16_pair_kernel(NormedPair p, float eps, float* __restrict__ y, int64_t rows, int64_t chunks) {
    const int64_t row = (int64_t(blockIdx.x) * kThreadsPerBlock + threadIdx.x) / kLanes;
    const bool active = row < rows;
    RowDot<kLanes, 2> dot[2];
    for (int i = 0; i < 2; ++i) {
        dot[i].start(reinterpret_cast<const uint4*>(p.w[i]) + (active ? row : 0) * chunks, active ? chunks : 0);
    }
    wait_for_inputs();
    allow_next_kernel();
    float sum = 0.0f;
    for (int i = 0; i < 2; ++i) {
        NormedInput input{reinterpret_cast<const float4*>(p.x[i]), reinterpret_cast<const float4*>(p.norm_weight[i])};
        const float dot_sum = dot[i].finish(input);
        sum += dot_sum * rsqrtf(RowDot<kLanes, 2>::group_sum(input.squares) / float(chunks * 8) + eps);
    }
    if (active && threadIdx.x % kLanes == 0) y[row] = kAdd ? y[row] + sum : sum;
}

template <int kLanes>
void launch_pair(const NormedPair& pair, float eps, bool add, float* y, int64_t rows, int64_t chunks,
                 cudaStream_t stream) {
    constexpr int64_t kRowsPerBlock = kThreadsPerBlock / kLanes;
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    require(blocks <= std::numeric_limits<int>::max(), "matvec_bf16_normed_pair: ", rows, " rows exceed the grid limit");
    launch_early(add ? matvec_bf16_pair_kernel<true, kLanes> : matvec_bf16_pair_kernel<false, kLanes>,
                 dim3(static_cast<unsigned>(blocks)), dim3(kThreadsPerBlock), 0, stream, "matvec_bf16_pair_kernel",
                 pair, eps, y, rows, chunks);
}

// The products of a group: the grid's blocks are the matrices' row blocks one after another
// (first_block[i] is matrix i's first block), so one launch streams every matrix's rows.
struct GroupLaunch {
    MatvecGroup group;
    int64_t first_block[kMatvecGroupMax + 1];
};

template <int kLanes>
__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSm)
    matvec_bf16_group_kernel(GroupLaunch g, const float4* __restrict__ x, int64_t chunks) {
    int i = 0;
    while (i + 1 < g.group.count && int64_t(blockIdx.x) >= g.first_block[i + 1]) ++i;
    const int64_t rows = g.group.rows[i];
    const int64_t row = ((int64_t(blockIdx.x) - g.first_block[i]) * kThreadsPerBlock + threadIdx.x) / kLanes;
    const bool active = row < rows;
    RowDot<kLanes> dot;
    dot.start(reinterpret_cast<const uint4*>(g.group.w[i]) + (active ? row : 0) * chunks, active ? chunks : 0);
    wait_for_inputs();
    allow_next_kernel();
    const float sum = dot.finish(PlainInput{x});
    if (active && threadIdx.x % kLanes == 0) g.group.y[i][row] = sum;
}

template <int kLanes>
void launch_group(const MatvecGroup& group, const float4* x, int64_t chunks, cudaStream_t stream) {
    constexpr int64_t kRowsPerBlock = kThreadsPerBlock / kLanes;
    GroupLaunch g{group, {}};
    for (int i = 0; i < group.count; ++i) {
        g.first_block[i + 1] = g.first_block[i] + (group.rows[i] + kRowsPerBlock - 1) / kRowsPerBlock;
    }
    const int64_t blocks = g.first_block[group.count];
    require(blocks <= std::numeric_limits<int>::max(), "matvec_bf16_group: ", blocks, " blocks exceed the grid limit");
    launch_early(matvec_bf16_group_kernel<kLanes>, dim3(static_cast<unsigned>(blocks)), dim3(kThreadsPerBlock), 0,
                 stream, "matvec_bf16_group_kernel", g, x, chunks);
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

}  // namespace

void matvec_bf16(const uint16_t* w, const float* x, float* y, int64_t rows, int64_t cols,
                 cudaStream_t stream) {
    matvec_bf16_fused(w, x, nullptr, 0.0f, false, y, rows, cols, stream);
}

bool matvec_bf16_fusable(const uint16_t* w, const float* x, const float* norm_weight, int64_t cols) {
    return cols % 8 == 0 && aligned_16(w) && aligned_16(x) && (norm_weight == nullptr || aligned_16(norm_weight));
}

void matvec_bf16_fused(const uint16_t* w, const float* x, const float* norm_weight, float eps, bool add, float* y,
                       int64_t rows, int64_t cols, cudaStream_t stream) {
    require(rows >= 0 && cols >= 0, "matvec_bf16: negative shape [", rows, ", ", cols, "]");
    if (rows == 0) return;
    require(y != nullptr, "matvec_bf16: null output pointer");
    require(cols == 0 || (w != nullptr && x != nullptr), "matvec_bf16: null input pointer");

    if (matvec_bf16_fusable(w, x, norm_weight, cols)) {
        const auto* w4 = reinterpret_cast<const uint4*>(w);
        const auto* x4 = reinterpret_cast<const float4*>(x);
        const auto* g4 = reinterpret_cast<const float4*>(norm_weight);
        const int64_t chunks = cols / 8;
        switch (row_lanes(chunks)) {
            case 32: launch_vec8<32>(w4, x4, g4, eps, add, y, rows, chunks, stream); break;
            case 16: launch_vec8<16>(w4, x4, g4, eps, add, y, rows, chunks, stream); break;
            default: launch_vec8<8>(w4, x4, g4, eps, add, y, rows, chunks, stream); break;
        }
    } else {
        require(norm_weight == nullptr && !add, "matvec_bf16: a fused norm or residual needs the vector path");
        const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
        require(blocks <= std::numeric_limits<int>::max(), "matvec_bf16: ", rows, " rows exceed the grid limit");
        matvec_bf16_scalar_kernel<<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(w, x, y, rows, cols);
        DUET_CUDA_CHECK_LAUNCH("matvec_bf16_scalar_kernel");
    }
}

void matvec_bf16_normed_pair(const NormedPair& pair, float eps, bool add, float* y, int64_t rows, int64_t cols,
                             cudaStream_t stream) {
    for (int i = 0; i < 2; ++i) {
        require(pair.norm_weight[i] != nullptr && matvec_bf16_fusable(pair.w[i], pair.x[i], pair.norm_weight[i], cols),
                "matvec_bf16_normed_pair: product ", i, " cannot take the vector path");
    }
    if (rows == 0) return;
    const int64_t chunks = cols / 8;
    switch (row_lanes(chunks)) {
        case 32: launch_pair<32>(pair, eps, add, y, rows, chunks, stream); break;
        case 16: launch_pair<16>(pair, eps, add, y, rows, chunks, stream); break;
        default: launch_pair<8>(pair, eps, add, y, rows, chunks, stream); break;
    }
}

void matvec_bf16_group(const MatvecGroup& group, const float* x, int64_t cols, cudaStream_t stream) {
    require(group.count >= 1 && group.count <= kMatvecGroupMax, "matvec_bf16_group: ", group.count,
            " matrices, expected 1 to ", kMatvecGroupMax);
    for (int i = 0; i < group.count; ++i) {
        require(group.y[i] != nullptr && matvec_bf16_fusable(group.w[i], x, nullptr, cols),
                "matvec_bf16_group: matrix ", i, " cannot take the vector path");
    }
    const auto* x4 = reinterpret_cast<const float4*>(x);
    const int64_t chunks = cols / 8;
    switch (row_lanes(chunks)) {
        case 32: launch_group<32>(group, x4, chunks, stream); break;
        case 16: launch_group<16>(group, x4, chunks, stream); break;
        default: launch_group<8>(group, x4, chunks, stream); break;
    }
}

}  // namespace duet::cuda
