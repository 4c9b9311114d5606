// The product chain's kernels: one product a kernel (its blocks waiting either for the previous
// kernel's end or for every one of its blocks to have counted itself done), or one resident kernel
// walking the whole chain. All use the same row dot as duet's products (RowDot: a warp a row, four
// 16-byte loads a lane in flight, requested before the wait), so only the hand-over differs; except
// the staged way, which asks for far more of its weights before the wait, as bulk copies into shared
// memory.

#include "kernels/cuda/product_chain.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/matvec_bf16.h"
#include "kernels/cuda/occupancy.h"
#include "kernels/cuda/random_bf16.h"
#include "kernels/cuda/stream_timer.h"

namespace duet::cuda {

namespace {

constexpr int kChainWarps = 4;
constexpr int kChainThreads = kChainWarps * kWarpSize;
constexpr int kChainBlocksPerSm = 8;

struct ChainLink {
    const uint4* w;
    const float4* x;
    float* y;
    int64_t rows, chunks;
};

// The input through ordinary cached loads, not the read-only path: a block of a kernel that is still
// running may have just written it. The acquire in wait_for_count drops stale lines from this SM's
// L1, so the warps of an SM still share one copy of x there (read through L2 only, every warp's
// copy made the products 2× slower).
struct CoherentInput {
    const float4* x;
    __device__ __forceinline__ void load(int64_t k, float4& lo, float4& hi) const {
        lo = __ldca(x + 2 * k);
        hi = __ldca(x + 2 * k + 1);
    }
};

// Thread 0 polls `count` with acquire loads until it reaches `target`; a barrier after it passes what
// it saw on to the others (as a grid-wide barrier does).
__device__ __forceinline__ void poll_count(const unsigned* count, unsigned target) {
    if (threadIdx.x != 0) return;
    unsigned seen;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
    } while (seen < target);
}

// Waits until `count` reaches `target`, the whole block.
__device__ __forceinline__ void wait_for_count(const unsigned* count, unsigned target) {
    poll_count(count, target);
    __syncthreads();
}

// Counts the block done once all its threads' writes are made visible to the whole device.
__device__ __forceinline__ void count_block_done(unsigned* count) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(count, 1u);
    }
}

// The staged way: a block an SM, its rows' weights brought into shared memory by bulk copies in
// stages of kStagedWarps warps' worth (a stage holds stage_rows rows, each row shared by
// kStagedWarps / stage_rows warps). A block takes at most kStagedShareBytes, so that the next
// product's blocks, launched early, fit beside it and have their first stages on the way while this
// one still streams.
constexpr int kStagedWarps = 8;
constexpr int kStagedThreads = kStagedWarps * kWarpSize;
constexpr int kStagedMaxStages = 8;
constexpr int64_t kStagedShareBytes = 110 * 1024;

struct StagedShape {
    int stage_rows = 0;  // 8, 4, 2 or 1; 0: rows too long to stage
    int stages = 0;
    size_t shared_bytes = 0;
};

// The largest stage (in rows, a power of two up to kStagedWarps) of which two fit beside the input.
StagedShape staged_shape(int64_t chunks) {
    StagedShape s;
    const int64_t row_bytes = chunks * 16, input_bytes = chunks * 32;
    const int64_t room = kStagedShareBytes - input_bytes;
    for (int r = kStagedWarps; r >= 1 && s.stage_rows == 0; r /= 2) {
        if (2 * r * row_bytes <= room) s.stage_rows = r;
    }
    if (s.stage_rows == 0) return s;
    s.stages = static_cast<int>(std::min<int64_t>(kStagedMaxStages, room / (s.stage_rows * row_bytes)));
    s.shared_bytes = static_cast<size_t>(s.stages * s.stage_rows * row_bytes + input_bytes);
    return s;
}

__global__ void __launch_bounds__(kStagedThreads, 1) chain_staged_kernel(ChainLink link, int stage_rows, int stages) {
    // The next product may launch at once: its blocks fit only beside this one's (shared memory), and
    // take each SM as this product's block there ends, with no wait for the whole grid to get under
    // way (releasing it after the wait measured 0.4–1.7 µs a product slower).
    allow_next_kernel();
    extern __shared__ __align__(128) unsigned char staged[];
    __shared__ uint64_t arrived[kStagedMaxStages];
    __shared__ float partial[2][kStagedWarps];
    const int64_t first = link.rows * blockIdx.x / gridDim.x, end = link.rows * (blockIdx.x + 1) / gridDim.x;
    const int64_t row_bytes = link.chunks * 16, stage_bytes = stage_rows * row_bytes;
    const int64_t tiles = (end - first + stage_rows - 1) / stage_rows;
    float4* x_lower = reinterpret_cast<float4*>(staged + stages * stage_bytes);
    float4* x_upper = x_lower + link.chunks;
    const auto request = [&](int64_t tile) {
        const int64_t row = first + tile * stage_rows;
        const int64_t n = end - row < stage_rows ? end - row : stage_rows;
        const int s = static_cast<int>(tile % stages);
        bulk_copy_to_shared(staged + s * stage_bytes, link.w + row * link.chunks, static_cast<uint32_t>(n * row_bytes),
                            &arrived[s]);
    };
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; ++s) bulk_barrier_init(&arrived[s]);
        for (int64_t t = 0; t < tiles && t < stages; ++t) request(t);
    }
    __syncthreads();
    wait_for_inputs();
    for (int64_t i = threadIdx.x; i < 2 * link.chunks; i += kStagedThreads) {
        (i % 2 == 0 ? x_lower : x_upper)[i / 2] = __ldg(link.x + i);
    }
    __syncthreads();
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    const int warps_a_row = kStagedWarps / stage_rows, slot = warp / warps_a_row, piece = warp % warps_a_row;
    for (int64_t t = 0; t < tiles; ++t) {
        const int s = static_cast<int>(t % stages);
        bulk_wait(&arrived[s], static_cast<uint32_t>((t / stages) & 1));
        const int64_t row = first + t * stage_rows + slot;
        float acc = 0.0f;
        if (row < end) {
            const uint4* w = reinterpret_cast<const uint4*>(staged + s * stage_bytes) + slot * link.chunks;
            for (int64_t k = piece * kWarpSize + lane; k < link.chunks; k += warps_a_row * kWarpSize) {
                acc = dot8(w[k], x_lower[k], x_upper[k], acc);
            }
        }
        acc = warp_sum(acc);
        if (lane == 0) partial[t % 2][warp] = acc;
        __syncthreads();  // the stage read by every warp, the partial sums written
        if (threadIdx.x == 0 && t + stages < tiles) request(t + stages);
        if (threadIdx.x < stage_rows && first + t * stage_rows + threadIdx.x < end) {
            float sum = 0.0f;
            for (int p = 0; p < warps_a_row; ++p) sum += partial[t % 2][threadIdx.x * warps_a_row + p];
            link.y[first + t * stage_rows + threadIdx.x] = sum;
        }
    }
}

// The streamed way: one resident kernel, a block an SM, block b taking the same share of every
// product's rows (rows · b / blocks onwards), in tiles of up to a stage's bytes. A warp of its own
// keeps the ring of stages filled by bulk copies with the block's next tiles, product after product,
// whether or not their inputs are ready, refilling each stage as soon as the warp that read it lets
// it go: the memory keeps streaming through the hand-overs, which cost the counts, the input's load
// and the tiles' arithmetic from shared memory. The reading warps take a product's tiles in turn,
// each tile whole (no barrier between them), and meet only at the hand-over. (The one-kernel way had
// only a row's first loads in flight at a hand-over; the staged way streams past its first stages
// only as fast as one block refills them, and pays a kernel's end a product.)
constexpr int kStreamWarps = 8;  // the warps that read the stages; one more fills them
constexpr int kStreamReaders = kStreamWarps * kWarpSize;
constexpr int kStreamThreads = kStreamReaders + kWarpSize;
constexpr int kStreamMaxStages = 16;
constexpr int64_t kStreamStageBytes = 16 * 1024;  // the least a stage holds; more where a row is longer

// A barrier of the reading warps alone (the filling warp never joins one).
__device__ __forceinline__ void readers_sync() {
    asm volatile("bar.sync 1, %0;" ::"n"(kStreamReaders) : "memory");
}

// Block blockIdx.x's rows of a product, [first, end), in tiles of tile_rows rows (a power of two up
// to 8, as many as a stage holds).
struct StreamShare {
    int64_t first, end, tile_rows, tiles;
};

__device__ __forceinline__ StreamShare stream_share(const ChainLink& link, int64_t stage_bytes) {
    StreamShare s;
    s.first = link.rows * blockIdx.x / gridDim.x;
    s.end = link.rows * (blockIdx.x + 1) / gridDim.x;
    s.tile_rows = 8;
    while (s.tile_rows > 1 && s.tile_rows * link.chunks * 16 > stage_bytes) s.tile_rows /= 2;
    s.tiles = (s.end - s.first + s.tile_rows - 1) / s.tile_rows;
    return s;
}

__global__ void __launch_bounds__(kStreamThreads, 1) chain_streamed_kernel(const ChainLink* links, int64_t products,
                                                                           int stages, int64_t stage_bytes,
                                                                           int64_t max_chunks, unsigned* done) {
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ uint64_t full[kStreamMaxStages], empty[kStreamMaxStages];
    // The tile each stage was last asked for: a reading warp waits for its tile's number before the
    // stage's barrier. The warps take a product's tiles in turn and may drift more than a ring apart,
    // and a barrier's phases are told apart by parity alone: a warp waiting on a stage whose previous
    // tile was not yet read would see that phase's completion as its own.
    __shared__ volatile int loaded_tile[kStreamMaxStages];
    float4* x_lower = reinterpret_cast<float4*>(ring + stages * stage_bytes);
    float4* x_upper = x_lower + max_chunks;
    auto stage_of = [&](int64_t t) { return ring + (t % stages) * stage_bytes; };
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    if (threadIdx.x == kStreamReaders) {
        for (int s = 0; s < stages; ++s) {
            bulk_barrier_init(&full[s]);
            arrivals_barrier_init(&empty[s], 1);
            loaded_tile[s] = -1;
        }
    }
    __syncthreads();
    if (warp == kStreamWarps) {
        // The filling warp: every tile of the block in order, each into its stage once the tile
        // `stages` before it has been read.
        if (lane != 0) return;
        int64_t t = 0;
        for (int64_t p = 0; p < products; ++p) {
            const ChainLink link = links[p];
            const StreamShare share = stream_share(link, stage_bytes);
            for (int64_t k = 0; k < share.tiles; ++k, ++t) {
                const int s = static_cast<int>(t % stages);
                if (t >= stages) bulk_wait(&empty[s], static_cast<uint32_t>((t / stages - 1) & 1));
                loaded_tile[s] = static_cast<int>(t);
                const int64_t row = share.first + k * share.tile_rows;
                const int64_t rows = min(share.tile_rows, share.end - row);
                bulk_copy_to_shared(stage_of(t), link.w + row * link.chunks,
                                    static_cast<uint32_t>(rows * link.chunks * 16), &full[s]);
            }
        }
        return;
    }
    int64_t first_tile = 0;  // the block's tiles of the products before
    for (int64_t p = 0; p < products; ++p) {
        const ChainLink link = links[p];
        const StreamShare share = stream_share(link, stage_bytes);
        if (p > 0) {
            poll_count(done + p - 1, gridDim.x);
            readers_sync();
        }
        if (share.tiles > 0) {
            // Past L1: the input was written by other blocks of this kernel.
            for (int64_t i = threadIdx.x; i < 2 * link.chunks; i += kStreamReaders) {
                (i % 2 == 0 ? x_lower : x_upper)[i / 2] = __ldcg(link.x + i);
            }
            readers_sync();
        }
        for (int64_t k = warp; k < share.tiles; k += kStreamWarps) {
            const int64_t t = first_tile + k;
            const int s = static_cast<int>(t % stages);
            while (loaded_tile[s] != static_cast<int>(t)) {
            }
            bulk_wait(&full[s], static_cast<uint32_t>((t / stages) & 1));
            const int64_t first_row = share.first + k * share.tile_rows;
            const int64_t rows = min(share.tile_rows, share.end - first_row);
            const uint4* w = reinterpret_cast<const uint4*>(stage_of(t));
            for (int64_t r = 0; r < rows; ++r) {
                float acc = 0.0f;
                for (int64_t c = lane; c < link.chunks; c += kWarpSize) {
                    acc = dot8(w[r * link.chunks + c], x_lower[c], x_upper[c], acc);
                }
                acc = warp_sum(acc);
                if (lane == 0) link.y[first_row + r] = acc;
            }
            __syncwarp();
            if (lane == 0) barrier_arrive(&empty[s]);
        }
        first_tile += share.tiles;
        // Every reader's rows written before the count: the barrier orders them before thread 0's
        // release, which makes them visible with its own.
        readers_sync();
        if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(done + p) : "memory");
    }
}

// One product, a warp a row. With kCounts the block waits for `wait_target` blocks of the previous
// product to have counted themselves in `wait_count` (none for the first) instead of the previous
// kernel's end, and counts itself into `done`.
template <bool kCounts>
__global__ void __launch_bounds__(kChainThreads, kChainBlocksPerSm)
    chain_product_kernel(ChainLink link, const unsigned* wait_count, unsigned wait_target, unsigned* done) {
    const int64_t row = int64_t(blockIdx.x) * kChainWarps + threadIdx.x / kWarpSize;
    const bool active = row < link.rows;
    RowDot<kWarpSize> dot;
    dot.start(link.w + (active ? row : 0) * link.chunks, active ? link.chunks : 0);
    if (kCounts && wait_count != nullptr) {
        wait_for_count(wait_count, wait_target);
    } else {
        wait_for_inputs();
    }
    allow_next_kernel();
    const float sum = dot.finish(CoherentInput{link.x});
    if (active && threadIdx.x % kWarpSize == 0) link.y[row] = sum;
    if (kCounts) count_block_done(done);
}

// The whole chain in one kernel of resident blocks: warp w of the grid takes rows w, w + warps, …
// of each product, requests its first row's weights, then waits until every block has counted
// itself done with the product before.
__global__ void __launch_bounds__(kChainThreads, kChainBlocksPerSm)
    chain_one_kernel(const ChainLink* links, int64_t products, unsigned* done) {
    const int64_t warps = int64_t(gridDim.x) * kChainWarps;
    const int64_t first = int64_t(blockIdx.x) * kChainWarps + threadIdx.x / kWarpSize;
    for (int64_t p = 0; p < products; ++p) {
        const ChainLink link = links[p];
        int64_t row = first;
        RowDot<kWarpSize> dot;
        dot.start(link.w + (row < link.rows ? row : 0) * link.chunks, row < link.rows ? link.chunks : 0);
        if (p > 0) wait_for_count(done + p - 1, gridDim.x);
        for (;;) {
            const float sum = dot.finish(CoherentInput{link.x});
            if (row < link.rows && threadIdx.x % kWarpSize == 0) link.y[row] = sum;
            row += warps;
            if (row >= link.rows) break;
            dot.start(link.w + row * link.chunks, link.chunks);
        }
        count_block_done(done + p);
    }
}

unsigned resident_chain_blocks() {
    const int blocks = resident_blocks(chain_one_kernel, kChainThreads);
    require(blocks > 0, "product chain: the one-kernel chain cannot be resident on this device");
    return static_cast<unsigned>(blocks);
}

ChainLink link_of(const uint16_t* w, const float* x, float* y, int64_t rows, int64_t cols) {
    return ChainLink{reinterpret_cast<const uint4*>(w), reinterpret_cast<const float4*>(x), y, rows, cols / 8};
}

}  // namespace

const char* hand_over_name(ChainHandOver hand_over) {
    switch (hand_over) {
        case ChainHandOver::duet_products: return "duet_products";
        case ChainHandOver::kernel_end: return "kernel_end";
        case ChainHandOver::block_counts: return "block_counts";
        case ChainHandOver::one_kernel: return "one_kernel";
        case ChainHandOver::staged: return "staged";
        case ChainHandOver::streamed: return "streamed";
    }
    return "?";
}

ProductChain::ProductChain(int64_t rows, int64_t cols, int64_t products, uint64_t seed)
    : rows_(rows), cols_(cols), products_(products), vector_stride_((std::max(rows, cols) + 63) / 64 * 64) {
    require(rows > 0 && cols > 0 && rows % 8 == 0 && cols % 8 == 0, "product chain: rows ", rows, " and cols ",
            cols, " must be positive multiples of 8");
    require(products >= 1 && products <= (1 << 16), "product chain: ", products, " products is outside 1..65536");
    weights_ = DeviceBuffer(static_cast<size_t>(products * rows * cols) * sizeof(uint16_t));
    vectors_ = DeviceBuffer(static_cast<size_t>((products + 1) * vector_stride_) * sizeof(float));
    counts_ = DeviceBuffer(static_cast<size_t>(products) * sizeof(unsigned));
    // Weights uniform in ±sqrt(3 / width): each product keeps the vector's size, so a long chain stays
    // finite.
    for (int64_t p = 0; p < products; ++p) {
        const float bound = std::sqrt(3.0f / static_cast<float>(in_cols(p)));
        fill_uniform_bf16(const_cast<uint16_t*>(weights_of(p)), rows * cols, seed + static_cast<uint64_t>(p), -bound,
                          bound, nullptr);
    }
    std::vector<float> x(static_cast<size_t>(vector_stride_), 0.0f);
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t c = 0; c < cols; ++c) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        x[static_cast<size_t>(c)] = static_cast<float>(state % 2001) / 1000.0f - 1.0f;
    }
    vectors_.upload(x);
    clear_outputs();
    std::vector<ChainLink> links;
    for (int64_t p = 0; p < products; ++p) {
        links.push_back(link_of(weights_of(p), vector(p), vector(p + 1), out_rows(p), in_cols(p)));
    }
    links_ = DeviceBuffer::from_vector(links);
    resident_blocks_ = resident_chain_blocks();
    staged_blocks_ = static_cast<unsigned>(current_device_multiprocessors());
    if (available(ChainHandOver::staged)) {
        DUET_CUDA_CHECK(cudaFuncSetAttribute(chain_staged_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(kStagedShareBytes)));
        // The streamed ring: as many stages as fit beside the widest input (lower and upper float4 of
        // each 16-byte group) and the kernel's own shared memory.
        const int64_t max_chunks = std::max(rows, cols) / 8;
        const size_t input_bytes = static_cast<size_t>(max_chunks) * 2 * sizeof(float4);
        const size_t room = max_dynamic_shared_bytes(reinterpret_cast<const void*>(chain_streamed_kernel));
        streamed_stage_bytes_ = std::max<int64_t>(kStreamStageBytes, max_chunks * 16);  // a row at least
        streamed_stages_ = room > input_bytes ? static_cast<int>(std::min<int64_t>(
                                                    kStreamMaxStages,
                                                    static_cast<int64_t>(room - input_bytes) / streamed_stage_bytes_))
                                              : 0;
        streamed_shared_bytes_ = static_cast<size_t>(streamed_stages_ * streamed_stage_bytes_) + input_bytes;
        DUET_CUDA_CHECK(cudaFuncSetAttribute(chain_streamed_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(streamed_shared_bytes_)));
    }
    DUET_CUDA_CHECK(cudaDeviceSynchronize());
}

const uint16_t* ProductChain::weights_of(int64_t p) const {
    return weights_.as<uint16_t>() + p * rows_ * cols_;
}

float* ProductChain::vector(int64_t i) const {
    return const_cast<float*>(vectors_.as<float>()) + i * vector_stride_;
}

void ProductChain::clear_outputs() {
    // All bits set is a NaN: a row left unwritten, or read before it was written, shows.
    DUET_CUDA_CHECK(cudaMemset(vector(1), 0xFF, static_cast<size_t>(products_ * vector_stride_) * sizeof(float)));
}

bool ProductChain::available(ChainHandOver hand_over) {
    return (hand_over != ChainHandOver::staged && hand_over != ChainHandOver::streamed) || bulk_copies_available();
}

void ProductChain::run(ChainHandOver hand_over, cudaStream_t stream) {
    require(available(hand_over), "product chain: the ", hand_over_name(hand_over),
            " way needs compute capability 9.0 (bulk copies into shared memory)");
    auto link = [&](int64_t p) { return link_of(weights_of(p), vector(p), vector(p + 1), out_rows(p), in_cols(p)); };
    unsigned* counts = counts_.as<unsigned>();
    if (hand_over == ChainHandOver::block_counts || hand_over == ChainHandOver::one_kernel ||
        hand_over == ChainHandOver::streamed) {
        DUET_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(products_) * sizeof(unsigned), stream));
    }
    if (hand_over == ChainHandOver::one_kernel || hand_over == ChainHandOver::streamed) {
        const bool streamed = hand_over == ChainHandOver::streamed;
        cudaLaunchConfig_t config{};
        config.gridDim = dim3(streamed ? staged_blocks_ : resident_blocks_);
        config.blockDim = dim3(streamed ? kStreamThreads : kChainThreads);
        config.dynamicSmemBytes = streamed ? streamed_shared_bytes_ : 0;
        config.stream = stream;
        // A cooperative launch fails rather than leaving blocks unscheduled, which would spin forever.
        cudaLaunchAttribute cooperative{};
        cooperative.id = cudaLaunchAttributeCooperative;
        cooperative.val.cooperative = 1;
        config.attrs = &cooperative;
        config.numAttrs = 1;
        const ChainLink* links = links_.as<const ChainLink>();
        require(!streamed || streamed_stages_ >= 2, "product chain: inputs of ", std::max(rows_, cols_),
                " values leave no room in shared memory for the streamed way's stages");
        if (streamed) {
            DUET_CUDA_CHECK(cudaLaunchKernelEx(&config, chain_streamed_kernel, links, products_, streamed_stages_,
                                               streamed_stage_bytes_, std::max(rows_, cols_) / 8, counts));
        } else {
            DUET_CUDA_CHECK(cudaLaunchKernelEx(&config, chain_one_kernel, links, products_, counts));
        }
        return;
    }
    for (int64_t p = 0; p < products_; ++p) {
        const ChainLink l = link(p);
        if (hand_over == ChainHandOver::duet_products) {
            matvec_bf16(weights_of(p), vector(p), vector(p + 1), l.rows, in_cols(p), stream);
            continue;
        }
        if (hand_over == ChainHandOver::staged) {
            const StagedShape shape = staged_shape(l.chunks);
            require(shape.stage_rows > 0, "product chain: rows of ", in_cols(p), " columns are too long to stage");
            launch_early(chain_staged_kernel, dim3(staged_blocks_), dim3(kStagedThreads), shape.shared_bytes, stream,
                         "chain_staged_kernel", l, shape.stage_rows, shape.stages);
            continue;
        }
        const unsigned blocks = static_cast<unsigned>((l.rows + kChainWarps - 1) / kChainWarps);
        const unsigned previous_blocks = p > 0 ? static_cast<unsigned>((out_rows(p - 1) + kChainWarps - 1) / kChainWarps) : 0;
        if (hand_over == ChainHandOver::kernel_end) {
            launch_early(chain_product_kernel<false>, dim3(blocks), dim3(kChainThreads), 0, stream,
                         "chain_product_kernel", l, static_cast<const unsigned*>(nullptr), 0u, counts + p);
        } else {
            launch_early(chain_product_kernel<true>, dim3(blocks), dim3(kChainThreads), 0, stream,
                         "chain_product_kernel", l, p > 0 ? static_cast<const unsigned*>(counts + p - 1) : nullptr,
                         previous_blocks, counts + p);
        }
    }
}

double ProductChain::median_pass_us(ChainHandOver hand_over, int repeats) {
    require(repeats >= 1, "product chain: ", repeats, " timed passes");
    StreamTimer timer;
    cudaGraphExec_t graph = nullptr;
    if (hand_over != ChainHandOver::one_kernel && hand_over != ChainHandOver::streamed) {
        cudaGraph_t recorded = nullptr;
        DUET_CUDA_CHECK(cudaStreamBeginCapture(timer.stream(), cudaStreamCaptureModeThreadLocal));
        run(hand_over, timer.stream());
        DUET_CUDA_CHECK(cudaStreamEndCapture(timer.stream(), &recorded));
        DUET_CUDA_CHECK(cudaGraphInstantiate(&graph, recorded, 0));
        DUET_CUDA_CHECK(cudaGraphDestroy(recorded));
    }
    std::vector<double> ms = timer.run_ms(
        [&] {
            if (graph != nullptr) {
                DUET_CUDA_CHECK(cudaGraphLaunch(graph, timer.stream()));
            } else {
                run(hand_over, timer.stream());
            }
        },
        2, repeats);
    if (graph != nullptr) DUET_CUDA_CHECK(cudaGraphExecDestroy(graph));
    std::sort(ms.begin(), ms.end());
    return 1000.0 * ms[ms.size() / 2];
}

std::vector<uint16_t> ProductChain::weights(int64_t p) const {
    require(p >= 0 && p < products_, "product chain: no product ", p);
    std::vector<uint16_t> w(static_cast<size_t>(rows_ * cols_));
    DUET_CUDA_CHECK(cudaMemcpy(w.data(), weights_of(p), w.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    return w;
}

std::vector<float> ProductChain::input() const {
    std::vector<float> x(static_cast<size_t>(cols_));
    DUET_CUDA_CHECK(cudaMemcpy(x.data(), vector(0), x.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return x;
}

std::vector<float> ProductChain::output() const {
    std::vector<float> y(static_cast<size_t>(out_rows(products_ - 1)));
    DUET_CUDA_CHECK(cudaDeviceSynchronize());
    DUET_CUDA_CHECK(cudaMemcpy(y.data(), vector(products_), y.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return y;
}

}  // namespace duet::cuda
