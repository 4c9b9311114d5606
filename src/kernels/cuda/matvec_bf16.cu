// Memory-bound bf16 matvec: each weight is read exactly once, so the kernel
// is about keeping enough wide loads in flight. One warp owns one row; lanes
// stride across the row, and a warp shuffle sums their partial results.

#include "kernels/cuda/matvec_bf16.h"

#include <cstdint>
#include <limits>
#include <utility>

#include "base/error.h"
#include "kernels/cuda/alignment.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/norm_ahead.cuh"

namespace duet::cuda {

namespace {

// Launch shape, chosen by measurement on an H200 (rows × cols from 2688 × 1856
// to 131072 × 2688): small blocks, 8 resident per SM, each lane with four
// 16-byte loads in flight. Larger blocks leave a bigger partial last wave;
// more residency forces the registers below 64 and costs more than it gains.
constexpr int kWarpsPerBlock = 4;
constexpr int kThreadsPerBlock = kWarpsPerBlock * kWarpSize;
constexpr int kMinBlocksPerSm = 8;

// The product kernels take their arguments as one struct, and find their row as the block's first row
// plus the thread's row within the block. Measured on an H200 against separate parameters and a row
// from the block's first thread: a chain of dependent 16–34 MB products 0.3–0.8 µs a product faster
// (as fast as the chain's bare kernels), a decode step within its spread (bench/NOTES.md).
template <int kLanes>
__device__ __forceinline__ int64_t block_row(int64_t block) {
    return block * (kThreadsPerBlock / kLanes) + threadIdx.x / kLanes;
}

// Vector path: rows are `chunks` groups of 8 bf16, i.e. 16 bytes each, kLanes lanes a row (see
// RowDot). With a norm weight the input is RMS-normalised on the fly (the row's lanes sum x² as they
// read it, see NormedInput); with `add` the result is added to y (a residual stream) instead of
// written, and with kAhead the stream's next norm is prepared on the way (norm_ahead.h).
struct Vec8Launch {
    const uint4* w;
    const float4* x;
    const float4* norm_weight;
    float* y;
    int64_t rows, chunks;
    float eps;
    NormAhead ahead;
};

template <bool kNorm, bool kAdd, bool kAhead, int kLanes>
__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSm) matvec_bf16_vec8_kernel(Vec8Launch a) {
    static_assert(kAdd || !kAhead, "only a product added to a stream prepares its next norm");
    const int64_t row = block_row<kLanes>(blockIdx.x);
    const bool active = row < a.rows;
    const bool owner = active && threadIdx.x % kLanes == 0;
    RowDot<kLanes> dot;
    dot.start(a.w + (active ? row : 0) * a.chunks, active ? a.chunks : 0);
    const float ahead_weight = kAhead && owner ? __ldg(a.ahead.weight + row) : 0.0f;
    wait_for_inputs();
    allow_next_kernel();
    float sum;
    if (kNorm) {
        NormedInput input{a.x, a.norm_weight};
        sum = dot.finish(input);
        sum *= rsqrtf(RowDot<kLanes>::group_sum(input.squares) / float(a.chunks * 8) + a.eps);
    } else {
        sum = dot.finish(PlainInput{a.x});
    }
    const float value = owner && kAdd ? a.y[row] + sum : sum;
    if (owner) a.y[row] = value;
    if (kAhead) write_norm_ahead(a.ahead, owner, row, value, ahead_weight);
}

template <int kLanes>
void launch_vec8(const uint4* w, const float4* x, const float4* norm_weight, float eps, bool add,
                 const NormAhead& ahead, float* y, int64_t rows, int64_t chunks, cudaStream_t stream) {
    constexpr int64_t kRowsPerBlock = kThreadsPerBlock / kLanes;
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    require(blocks <= std::numeric_limits<int>::max(), "matvec_bf16: ", rows, " rows exceed the grid limit");
    const bool norm = norm_weight != nullptr;
    require(add || !ahead.on(), "matvec_bf16: a norm is prepared only by a product added to its stream");
    auto* kernel = ahead.on() ? (norm ? matvec_bf16_vec8_kernel<true, true, true, kLanes>
                                      : matvec_bf16_vec8_kernel<false, true, true, kLanes>)
                   : norm     ? (add ? matvec_bf16_vec8_kernel<true, true, false, kLanes>
                                     : matvec_bf16_vec8_kernel<true, false, false, kLanes>)
                              : (add ? matvec_bf16_vec8_kernel<false, true, false, kLanes>
                                     : matvec_bf16_vec8_kernel<false, false, false, kLanes>);
    launch_early(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreadsPerBlock), 0, stream,
                 "matvec_bf16_vec8_kernel", Vec8Launch{w, x, norm_weight, y, rows, chunks, eps, ahead});
}

// The products of a group: the grid's blocks are the matrices' row blocks one after another
// (first_block[i] is matrix i's first block), so one launch streams every matrix's rows.
struct GroupLaunch {
    MatvecGroup group;
    int64_t first_block[kMatvecGroupMax + 1];
    const float4* x;
    const float4* norm_weight;  // null without a norm
    int64_t chunks;
    float eps;
    NormAhead ahead;  // on: the input is rmsnorm(x) prepared ahead, x is not read
    float* keep;      // non-null (with a norm): block 0 also stores rmsnorm(x) there [8 · chunks]
};

// Row *row_id of a bf16 table ([.., 8 · chunks]; a negative id is a zero row) as an input read in
// place: an embedding row needs no gather before the product. load(k) gives group k's 8 values.
struct Bf16RowInput {
    const uint4* __restrict__ row;  // null for the zero row
    __device__ Bf16RowInput(const uint4* table, const int32_t* row_id, int64_t chunks) {
        const int32_t id = __ldcg(row_id);  // past L1: it may be read before the kernel's wait
        row = id >= 0 ? table + id * chunks : nullptr;
    }
    __device__ __forceinline__ void load(int64_t k, float4& lo, float4& hi) const {
        const uint4 raw = row != nullptr ? __ldg(row + k) : make_uint4(0, 0, 0, 0);
        lo = make_float4(bf16_low_to_float(raw.x), bf16_high_to_float(raw.x), bf16_low_to_float(raw.y),
                         bf16_high_to_float(raw.y));
        hi = make_float4(bf16_low_to_float(raw.z), bf16_high_to_float(raw.z), bf16_low_to_float(raw.w),
                         bf16_high_to_float(raw.w));
    }
};

// Fills `shared` ([2 · chunks] float4, the layout SharedInput reads) with the input (PlainInput or
// Bf16RowInput) times norm_weight over the block's threads and returns its 1/rms to every thread.
template <typename Input>
__device__ __forceinline__ float prepare_normed(const Input& input, const float4* __restrict__ norm_weight, float eps,
                                                int64_t chunks, float4* shared) {
    __shared__ float partial[kWarpsPerBlock];
    float squares = 0.0f;
#pragma unroll 2
    for (int64_t k = threadIdx.x; k < chunks; k += kThreadsPerBlock) {
        float4 lo, hi;
        input.load(k, lo, hi);
        const float4 g = __ldg(norm_weight + 2 * k), h = __ldg(norm_weight + 2 * k + 1);
        squares += lo.x * lo.x + lo.y * lo.y + lo.z * lo.z + lo.w * lo.w + hi.x * hi.x + hi.y * hi.y + hi.z * hi.z +
                   hi.w * hi.w;
        shared[k] = make_float4(lo.x * g.x, lo.y * g.y, lo.z * g.z, lo.w * g.w);
        shared[chunks + k] = make_float4(hi.x * h.x, hi.y * h.y, hi.z * h.z, hi.w * h.w);
    }
    // block_sum's barriers also make every thread's shared writes visible to the block.
    return rsqrtf(block_sum(squares, partial) / float(chunks * 8) + eps);
}

// Stores an input's groups (x · norm weight, as the block holds them) times inv_rms into keep
// [8 · chunks] over the block's threads: rmsnorm(x), for readers after this kernel.
template <typename Weighted>
__device__ __forceinline__ void keep_normed(const Weighted& input, float inv_rms, int64_t chunks, float* keep) {
    auto* out = reinterpret_cast<float4*>(keep);
    for (int64_t k = threadIdx.x; k < chunks; k += blockDim.x) {
        float4 lo, hi;
        input.load(k, lo, hi);
        out[2 * k] = make_float4(lo.x * inv_rms, lo.y * inv_rms, lo.z * inv_rms, lo.w * inv_rms);
        out[2 * k + 1] = make_float4(hi.x * inv_rms, hi.y * inv_rms, hi.z * inv_rms, hi.w * inv_rms);
    }
}

// What a product's rows multiply: x as it is, rmsnorm(x) made by each block in shared memory after
// its wait, or rmsnorm(x) prepared ahead by the kernel that wrote x (norm_ahead.h).
enum class Input { Plain, Normed, Ahead };

// The part of a product kernel after its first loads: waits for the kernel before, lets the next one
// launch, and finishes the row's dot with the input of kind kInput; a Normed input takes dynamic
// shared memory of 2 · chunks float4.
template <Input kInput, int kLanes>
__device__ __forceinline__ float finish_after_wait(RowDot<kLanes>& dot, const float4* __restrict__ x,
                                                   const float4* __restrict__ norm_weight, float eps, int64_t chunks,
                                                   const NormAhead& ahead, float* keep = nullptr) {
    wait_for_inputs();
    allow_next_kernel();
    if constexpr (kInput == Input::Normed) {
        extern __shared__ float4 normed_input[];
        const float inv_rms = prepare_normed(PlainInput{x}, norm_weight, eps, chunks, normed_input);
        if (keep != nullptr) keep_normed(SharedInput{normed_input, normed_input + chunks}, inv_rms, chunks, keep);
        return dot.finish(SharedInput{normed_input, normed_input + chunks}) * inv_rms;
    } else if constexpr (kInput == Input::Ahead) {
        const float inv_rms = norm_ahead_inv_rms(ahead, chunks * 8, eps);
        const PlainInput weighted{reinterpret_cast<const float4*>(ahead.weighted)};
        if (keep != nullptr) keep_normed(weighted, inv_rms, chunks, keep);
        return dot.finish(weighted) * inv_rms;
    } else {
        return dot.finish(PlainInput{x});
    }
}

// The input kind of a product launch: prepared ahead, normalised by each block, or plain.
inline Input input_of(const float4* norm_weight, const NormAhead& ahead) {
    return ahead.on() ? Input::Ahead : norm_weight != nullptr ? Input::Normed : Input::Plain;
}

// Launches the kernel of the input kind, a Normed one with its normalised input's shared memory.
template <typename... Params, typename... Args>
void launch_for_input(Input input, void (*plain)(Params...), void (*normed)(Params...), void (*ahead)(Params...),
                      int64_t blocks, int64_t chunks, cudaStream_t stream, const char* name, Args&&... args) {
    const bool shared = input == Input::Normed;
    launch_early(input == Input::Ahead ? ahead : shared ? normed : plain, dim3(static_cast<unsigned>(blocks)),
                 dim3(kThreadsPerBlock), shared ? static_cast<size_t>(chunks) * 2 * sizeof(float4) : 0, stream, name,
                 std::forward<Args>(args)...);
}

// Two normalised products summed into one output row by row (matvec_bf16_normed_pair): each row's
// two halves are two lane groups side by side, each streaming its matrix's row with a plain
// product's loads in flight, so a row takes as many rounds of loads as one product's. (One group
// streaming both rows in turn took twice the rounds: the tower input's pair ran at half the speed
// of a single product of its size.) Each block normalises both inputs once into shared memory, as
// the normalised group does, which lets an input be an embedding row read in place (the lanes
// normalising their input on the way, as before, ran no faster).
//
// With kEarly, input a.pair.early was written before the launch before this one began
// (NormedPair::early), so its half of the block does all of its product before the wait: the block
// normalises that input, its lanes stream their row and then ask for the second part of the other
// row, whose own lanes asked only for the first. After the wait the block prepares the other input
// and both lane groups finish their parts of that row from weights already on the way: the bytes
// stream while the kernel before (a code's draw) runs. Whole-warp rows only, so each half's
// shuffles stay within its own warps.
struct PairLaunch {
    NormedPair pair;
    float* y;
    int64_t rows, chunks;
    float eps;
    NormAhead ahead;  // on: y's next norm prepared as it is written (norm_ahead.h)
};

// x read past L1 (ld.global.cg): an input read before the kernel's wait is current in L2, where
// an SM's L1 may still hold its lines from before it was written.
struct L2Input {
    const float4* __restrict__ x;
    __device__ __forceinline__ void load(int64_t k, float4& lo, float4& hi) const {
        lo = __ldcg(x + 2 * k);
        hi = __ldcg(x + 2 * k + 1);
    }
};

// Input i of the pair normalised into the block's shared memory (normed_inputs + i · 2 · chunks);
// returns its 1/rms to every thread. kPastL1 for an input read before the wait (L2Input); after it
// the block's reads share the SM's L1 with its neighbours' (all of them past L1 made a hot spot in L2).
template <bool kPastL1>
__device__ __forceinline__ float prepare_pair_input(const PairLaunch& a, int i, float4* normed_inputs) {
    const NormedPair& p = a.pair;
    const auto* norm_weight = reinterpret_cast<const float4*>(p.norm_weight[i]);
    float4* prepared = normed_inputs + i * 2 * a.chunks;
    if (p.table[i] != nullptr) {
        return prepare_normed(Bf16RowInput(reinterpret_cast<const uint4*>(p.table[i]), p.row_id[i], a.chunks),
                              norm_weight, a.eps, a.chunks, prepared);
    }
    const auto* x = reinterpret_cast<const float4*>(p.x[i]);
    if constexpr (kPastL1) return prepare_normed(L2Input{x}, norm_weight, a.eps, a.chunks, prepared);
    return prepare_normed(PlainInput{x}, norm_weight, a.eps, a.chunks, prepared);
}

template <bool kAdd, bool kEarly, int kLanes>
__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSm) matvec_bf16_pair_kernel(PairLaunch a) {
    static_assert(!kEarly || kLanes == kWarpSize, "an early half keeps its shuffles to its own warps");
    constexpr int kGroups = kThreadsPerBlock / kLanes;  // two a row
    __shared__ float halves[kGroups];
    extern __shared__ float4 normed_inputs[];  // [2][2 · chunks]: each half's prepared input
    const int group = threadIdx.x / kLanes, half = group % 2;
    const int64_t row = int64_t(blockIdx.x) * (kGroups / 2) + group / 2;
    const bool active = row < a.rows;
    const bool owner = active && half == 0 && threadIdx.x % kLanes == 0;  // the lane that writes the row
    auto row_of = [&](int i) { return reinterpret_cast<const uint4*>(a.pair.w[i]) + (active ? row : 0) * a.chunks; };
    auto input_of = [&](int i, int64_t from) {
        const float4* prepared = normed_inputs + i * 2 * a.chunks;
        return SharedInput{prepared + from, prepared + a.chunks + from};
    };
    RowDot<kLanes> dot;
    float product = 0.0f, ahead_weight = 0.0f;
    if constexpr (kEarly) {
        const int early = a.pair.early, late = 1 - early;
        const bool mine_early = half == early;
        const int64_t split = a.chunks / 2;  // the late row's groups [0, split) by its own lanes
        dot.start(row_of(mine_early ? early : late), active ? (mine_early ? a.chunks : split) : 0);
        ahead_weight = a.ahead.on() && owner ? __ldg(a.ahead.weight + row) : 0.0f;
        const float inv_early = prepare_pair_input<true>(a, early, normed_inputs);
        if (mine_early) {
            product = dot.finish(input_of(early, 0)) * inv_early;
            dot.start(row_of(late) + split, active ? a.chunks - split : 0);
        }
        wait_for_inputs();
        allow_next_kernel();
        const float inv_late = prepare_pair_input<false>(a, late, normed_inputs);
        product += dot.finish(input_of(late, mine_early ? split : 0)) * inv_late;
    } else {
        dot.start(row_of(half), active ? a.chunks : 0);
        ahead_weight = a.ahead.on() && owner ? __ldg(a.ahead.weight + row) : 0.0f;
        wait_for_inputs();
        allow_next_kernel();
        float inv_rms[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) inv_rms[i] = prepare_pair_input<false>(a, i, normed_inputs);
        product = dot.finish(input_of(half, 0)) * inv_rms[half];
    }
    if (threadIdx.x % kLanes == 0) halves[group] = product;
    __syncthreads();
    float value = 0.0f;
    if (owner) {
        value = halves[group] + halves[group + 1];
        if (kAdd) value += a.y[row];
        a.y[row] = value;
    }
    if (a.ahead.on()) write_norm_ahead(a.ahead, owner, row, value, ahead_weight);
}

template <int kLanes>
void launch_pair(const NormedPair& pair, float eps, bool add, const NormAhead& ahead, float* y, int64_t rows,
                 int64_t chunks, cudaStream_t stream) {
    constexpr int64_t kRowsPerBlock = kThreadsPerBlock / kLanes / 2;
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    require(blocks <= std::numeric_limits<int>::max(), "matvec_bf16_normed_pair: ", rows, " rows exceed the grid limit");
    void (*kernel)(PairLaunch) = add ? matvec_bf16_pair_kernel<true, false, kLanes>
                                     : matvec_bf16_pair_kernel<false, false, kLanes>;
    if constexpr (kLanes == kWarpSize) {
        if (pair.early >= 0) {
            kernel = add ? matvec_bf16_pair_kernel<true, true, kLanes> : matvec_bf16_pair_kernel<false, true, kLanes>;
        }
    }
    launch_early(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreadsPerBlock),
                 static_cast<size_t>(chunks) * 4 * sizeof(float4), stream, "matvec_bf16_pair_kernel",
                 PairLaunch{pair, y, rows, chunks, eps, ahead});
}

// The group's input is x, or rmsnorm(x) with `norm_weight` (matvec_bf16_group_normed).
template <int kLanes, Input kInput>
__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSm)
    matvec_bf16_group_kernel(GroupLaunch g) {
    int i = 0;
    while (i + 1 < g.group.count && int64_t(blockIdx.x) >= g.first_block[i + 1]) ++i;
    const int64_t rows = g.group.rows[i], chunks = g.chunks;
    const int64_t row = block_row<kLanes>(int64_t(blockIdx.x) - g.first_block[i]);
    const bool active = row < rows;
    RowDot<kLanes> dot;
    dot.start(reinterpret_cast<const uint4*>(g.group.w[i]) + (active ? row : 0) * chunks, active ? chunks : 0);
    const float sum = finish_after_wait<kInput>(dot, g.x, g.norm_weight, g.eps, chunks, g.ahead,
                                                blockIdx.x == 0 ? g.keep : nullptr);
    if (active && threadIdx.x % kLanes == 0) g.group.y[i][row] = sum;
}

template <int kLanes>
void launch_group(const MatvecGroup& group, const float4* x, const float4* norm_weight, float eps, int64_t chunks,
                  const NormAhead& ahead, float* keep, cudaStream_t stream) {
    constexpr int64_t kRowsPerBlock = kThreadsPerBlock / kLanes;
    GroupLaunch g{group, {}, x, norm_weight, chunks, eps, ahead, keep};
    for (int i = 0; i < group.count; ++i) {
        g.first_block[i + 1] = g.first_block[i] + (group.rows[i] + kRowsPerBlock - 1) / kRowsPerBlock;
    }
    const int64_t blocks = g.first_block[group.count];
    require(blocks <= std::numeric_limits<int>::max(), "matvec_bf16_group: ", blocks, " blocks exceed the grid limit");
    launch_for_input(input_of(norm_weight, ahead), matvec_bf16_group_kernel<kLanes, Input::Plain>,
                     matvec_bf16_group_kernel<kLanes, Input::Normed>, matvec_bf16_group_kernel<kLanes, Input::Ahead>,
                     blocks, chunks, stream, "matvec_bf16_group_kernel", g);
}

// A SwiGLU's products of one input, y = silu(gate · x) · (up · x) (matvec_bf16_swiglu): a pair of rows
// takes 2 · kLanes lanes of a warp, the lower kLanes streaming the gate's row and the upper the up
// product's, so both are in flight at once; the input is x or rmsnorm(x), as in the group.
struct SwigluLaunch {
    const uint4* gate;
    const uint4* up;
    const float4* x;
    const float4* norm_weight;  // null without a norm
    float* y;
    int64_t rows, chunks;
    float eps;
    NormAhead ahead;  // on: the input is rmsnorm(x) prepared ahead
};

template <int kLanes, Input kInput>
__global__ void __launch_bounds__(kThreadsPerBlock, kMinBlocksPerSm) matvec_bf16_swiglu_kernel(SwigluLaunch a) {
    static_assert(2 * kLanes <= kWarpSize, "a pair of rows fits in a warp");
    const int64_t row = block_row<2 * kLanes>(blockIdx.x);
    const bool active = row < a.rows;
    const bool up_half = (threadIdx.x / kLanes) % 2 == 1;
    RowDot<kLanes> dot;
    dot.start((up_half ? a.up : a.gate) + (active ? row : 0) * a.chunks, active ? a.chunks : 0);
    const float sum = finish_after_wait<kInput>(dot, a.x, a.norm_weight, a.eps, a.chunks, a.ahead);
    const float up_sum = __shfl_down_sync(0xFFFFFFFFu, sum, kLanes);  // the up half's sum, to the gate half
    if (active && threadIdx.x % (2 * kLanes) == 0) a.y[row] = silu(sum) * up_sum;
}

template <int kLanes>
void launch_swiglu(const uint4* gate, const uint4* up, const float4* x, const float4* norm_weight, float eps,
                   const NormAhead& ahead, float* y, int64_t rows, int64_t chunks, cudaStream_t stream) {
    constexpr int64_t kRowsPerBlock = kThreadsPerBlock / (2 * kLanes);
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    require(blocks <= std::numeric_limits<int>::max(), "matvec_bf16_swiglu: ", rows, " rows exceed the grid limit");
    launch_for_input(input_of(norm_weight, ahead), matvec_bf16_swiglu_kernel<kLanes, Input::Plain>,
                     matvec_bf16_swiglu_kernel<kLanes, Input::Normed>, matvec_bf16_swiglu_kernel<kLanes, Input::Ahead>,
                     blocks, chunks, stream, "matvec_bf16_swiglu_kernel",
                     SwigluLaunch{gate, up, x, norm_weight, y, rows, chunks, eps, ahead});
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
                       int64_t rows, int64_t cols, cudaStream_t stream, const NormAhead& ahead) {
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
            case 32: launch_vec8<32>(w4, x4, g4, eps, add, ahead, y, rows, chunks, stream); break;
            case 16: launch_vec8<16>(w4, x4, g4, eps, add, ahead, y, rows, chunks, stream); break;
            default: launch_vec8<8>(w4, x4, g4, eps, add, ahead, y, rows, chunks, stream); break;
        }
    } else {
        require(norm_weight == nullptr && !add && !ahead.on(),
                "matvec_bf16: a fused norm or residual needs the vector path");
        const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
        require(blocks <= std::numeric_limits<int>::max(), "matvec_bf16: ", rows, " rows exceed the grid limit");
        matvec_bf16_scalar_kernel<<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(w, x, y, rows, cols);
        DUET_CUDA_CHECK_LAUNCH("matvec_bf16_scalar_kernel");
    }
}

bool matvec_bf16_pair_normable(int64_t cols) { return matvec_bf16_group_normable(2 * cols); }

void matvec_bf16_normed_pair(const NormedPair& pair, float eps, bool add, float* y, int64_t rows, int64_t cols,
                             cudaStream_t stream, const NormAhead& ahead) {
    require(matvec_bf16_pair_normable(cols), "matvec_bf16_normed_pair: ", cols,
            " columns do not fit the shared memory of both normalised inputs");
    for (int i = 0; i < 2; ++i) {
        const bool row_input = pair.table[i] != nullptr;
        const bool input_ok = row_input ? pair.row_id[i] != nullptr && aligned_16(pair.table[i]) : pair.x[i] != nullptr;
        require(input_ok && pair.norm_weight[i] != nullptr &&
                    matvec_bf16_fusable(pair.w[i], row_input ? nullptr : pair.x[i], pair.norm_weight[i], cols),
                "matvec_bf16_normed_pair: product ", i, " cannot take the vector path");
    }
    require(pair.early >= -1 && pair.early <= 1, "matvec_bf16_normed_pair: early input ", pair.early,
            ", expected 0, 1 or -1");
    if (rows == 0) return;
    const int64_t chunks = cols / 8;
    switch (row_lanes(chunks)) {
        case 32: launch_pair<32>(pair, eps, add, ahead, y, rows, chunks, stream); break;
        case 16: launch_pair<16>(pair, eps, add, ahead, y, rows, chunks, stream); break;
        default: launch_pair<8>(pair, eps, add, ahead, y, rows, chunks, stream); break;
    }
}

namespace {

void check_group(const MatvecGroup& group, const float* x, const float* norm_weight, int64_t cols, const char* what) {
    require(group.count >= 1 && group.count <= kMatvecGroupMax, what, ": ", group.count, " matrices, expected 1 to ",
            kMatvecGroupMax);
    for (int i = 0; i < group.count; ++i) {
        require(group.y[i] != nullptr && matvec_bf16_fusable(group.w[i], x, norm_weight, cols), what, ": matrix ", i,
                " cannot take the vector path");
    }
}

void dispatch_group(const MatvecGroup& group, const float* x, const float* norm_weight, float eps, int64_t cols,
                    const NormAhead& ahead, float* keep, cudaStream_t stream) {
    const auto* x4 = reinterpret_cast<const float4*>(x);
    const auto* g4 = reinterpret_cast<const float4*>(norm_weight);
    const int64_t chunks = cols / 8;
    switch (row_lanes(chunks)) {
        case 32: launch_group<32>(group, x4, g4, eps, chunks, ahead, keep, stream); break;
        case 16: launch_group<16>(group, x4, g4, eps, chunks, ahead, keep, stream); break;
        default: launch_group<8>(group, x4, g4, eps, chunks, ahead, keep, stream); break;
    }
}

}  // namespace

void matvec_bf16_group(const MatvecGroup& group, const float* x, int64_t cols, cudaStream_t stream) {
    check_group(group, x, nullptr, cols, "matvec_bf16_group");
    dispatch_group(group, x, nullptr, 0.0f, cols, NormAhead{}, nullptr, stream);
}

bool matvec_bf16_group_normable(int64_t cols) {
    return cols > 0 && cols * static_cast<int64_t>(sizeof(float)) <= kGroupNormedMaxBytes;
}

namespace {

void require_normable(int64_t cols, const char* what) {
    require(matvec_bf16_group_normable(cols), what, ": ", cols, " columns exceed the ", kGroupNormedMaxBytes,
            " bytes of shared memory the normalised input may take");
}

}  // namespace

void matvec_bf16_group_normed(const MatvecGroup& group, const float* x, const float* norm_weight, float eps,
                              int64_t cols, cudaStream_t stream, const NormAhead& ahead, float* keep) {
    require(norm_weight != nullptr, "matvec_bf16_group_normed: no norm weights");
    require_normable(cols, "matvec_bf16_group_normed");
    check_group(group, ahead.on() ? ahead.weighted : x, norm_weight, cols, "matvec_bf16_group_normed");
    require(keep == nullptr || aligned_16(keep), "matvec_bf16_group_normed: the kept norm must be 16-byte aligned");
    dispatch_group(group, x, norm_weight, eps, cols, ahead, keep, stream);
}

void matvec_bf16_swiglu(const uint16_t* gate, const uint16_t* up, const float* x, const float* norm_weight, float eps,
                        float* y, int64_t rows, int64_t cols, cudaStream_t stream, const NormAhead& ahead) {
    require(rows >= 0 && y != nullptr, "matvec_bf16_swiglu: no output for ", rows, " rows");
    require(matvec_bf16_fusable(gate, x, norm_weight, cols) && matvec_bf16_fusable(up, x, nullptr, cols),
            "matvec_bf16_swiglu: the products cannot take the vector path");
    if (norm_weight != nullptr) require_normable(cols, "matvec_bf16_swiglu");
    require(!ahead.on() || (norm_weight != nullptr && aligned_16(ahead.weighted)),
            "matvec_bf16_swiglu: a norm prepared ahead needs its weights and an aligned input");
    if (rows == 0) return;
    const auto* g4 = reinterpret_cast<const uint4*>(gate);
    const auto* u4 = reinterpret_cast<const uint4*>(up);
    const auto* x4 = reinterpret_cast<const float4*>(x);
    const auto* n4 = reinterpret_cast<const float4*>(norm_weight);
    const int64_t chunks = cols / 8;
    if (row_lanes(chunks) >= 16) {
        launch_swiglu<16>(g4, u4, x4, n4, eps, ahead, y, rows, chunks, stream);
    } else {
        launch_swiglu<8>(g4, u4, x4, n4, eps, ahead, y, rows, chunks, stream);
    }
}

}  // namespace duet::cuda
