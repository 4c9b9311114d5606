// A long prompt's routed experts in one launch per matrix kind: every expert's tile of rows is
// multiplied by its own bf16 matrix on tensor cores, both halves of the split activations
// (hi + lo, see ops_prefill.cu) accumulating into one f32 result. One cuBLAS call per expert and
// half cost more in launches than in bytes: a 512-row prompt gives a 256-expert layer about 16 rows
// an expert, and 1536 calls a layer.
//
// A block computes 32 rows × 128 outputs of one expert, 64 columns at a time: the next columns'
// weights and activations are loaded into registers while the current ones, in shared memory, go
// through the tensor cores. The tiles of one expert are numbered together, so the blocks that read
// the same weights run side by side and share them through L2.
#include <cuda_bf16.h>
#include <mma.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace duet::cuda {

namespace {

using namespace nvcuda;

constexpr int kTileRows = kExpertTileRows;  // token rows a block
constexpr int kTileOut = 128;               // output features a block: 32 a warp
constexpr int kTileK = 64;                  // columns a stage
constexpr int kLd = kTileK + 8;             // shared rows 144 bytes apart, so fragment loads spread over banks
constexpr int kThreads = 128;
constexpr int kChunksPerRow = kTileK / 8;   // 16-byte chunks of 8 bf16
constexpr int kWeightChunks = kTileOut * kChunksPerRow / kThreads;  // a thread's per stage: 8
constexpr int kRowChunks = kTileRows * kChunksPerRow / kThreads;    // of each half: 2
constexpr int kOutLd = kTileOut + 4;

struct Stage {
    __nv_bfloat16 w[kTileOut][kLd];
    __nv_bfloat16 hi[kTileRows][kLd];
    __nv_bfloat16 lo[kTileRows][kLd];
};
static_assert(sizeof(Stage) >= sizeof(float) * kTileRows * kOutLd, "the result tile reuses the stage");

struct GroupedArgs {
    const void* const* experts;
    int64_t rows, cols;
    const ExpertRowTile* tiles;
    const int32_t* tile_count;
    const uint16_t* hi;
    const uint16_t* lo;
    float* out;
};

// Eight bf16 from row[k..k+8), zero past `cols` or for a row outside the matrix; with kVectors
// (rows of whole, aligned 16-byte chunks) as one load.
template <bool kVectors>
__device__ __forceinline__ uint4 load_chunk(const uint16_t* row, int64_t k, int64_t cols, bool inside) {
    if (!inside || k >= cols) return make_uint4(0, 0, 0, 0);
    if constexpr (kVectors) {
        return *reinterpret_cast<const uint4*>(row + k);
    } else {
        uint32_t pairs[4];
        for (int e = 0; e < 4; ++e) {
            const uint32_t low = k + 2 * e < cols ? row[k + 2 * e] : 0u;
            const uint32_t high = k + 2 * e + 1 < cols ? row[k + 2 * e + 1] : 0u;
            pairs[e] = low | (high << 16);
        }
        return make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
    }
}

template <bool kVectors>
__global__ void __launch_bounds__(kThreads, 4) grouped_split_kernel(GroupedArgs a) {
    __shared__ __align__(128) unsigned char shared[sizeof(Stage)];
    Stage& stage = *reinterpret_cast<Stage*>(shared);
    // The grid is sized for the most tiles the slots may need; the grouping counted the real ones.
    if (int(blockIdx.x) >= *a.tile_count) return;
    const ExpertRowTile tile = a.tiles[blockIdx.x];
    const int64_t out0 = int64_t(blockIdx.y) * kTileOut;
    const uint16_t* w = static_cast<const uint16_t*>(a.experts[tile.expert]);
    const int t = threadIdx.x, warp = t / 32;

    uint4 w_next[kWeightChunks], hi_next[kRowChunks], lo_next[kRowChunks];
    auto fetch = [&](int64_t k0) {
        for (int j = 0; j < kWeightChunks; ++j) {
            const int i = t + j * kThreads, r = i / kChunksPerRow, k = (i % kChunksPerRow) * 8;
            const int64_t row = out0 + r;
            w_next[j] = load_chunk<kVectors>(w + row * a.cols, k0 + k, a.cols, row < a.rows);
        }
        for (int j = 0; j < kRowChunks; ++j) {
            const int i = t + j * kThreads, r = i / kChunksPerRow, k = (i % kChunksPerRow) * 8;
            const int64_t row = int64_t(tile.first_row) + r;
            hi_next[j] = load_chunk<kVectors>(a.hi + row * a.cols, k0 + k, a.cols, r < tile.count);
            lo_next[j] = load_chunk<kVectors>(a.lo + row * a.cols, k0 + k, a.cols, r < tile.count);
        }
    };
    auto stash = [&] {
        for (int j = 0; j < kWeightChunks; ++j) {
            const int i = t + j * kThreads;
            *reinterpret_cast<uint4*>(&stage.w[i / kChunksPerRow][(i % kChunksPerRow) * 8]) = w_next[j];
        }
        for (int j = 0; j < kRowChunks; ++j) {
            const int i = t + j * kThreads, r = i / kChunksPerRow, k = (i % kChunksPerRow) * 8;
            *reinterpret_cast<uint4*>(&stage.hi[r][k]) = hi_next[j];
            *reinterpret_cast<uint4*>(&stage.lo[r][k]) = lo_next[j];
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
    for (auto& row : acc)
        for (auto& f : row) wmma::fill_fragment(f, 0.0f);
    fetch(0);
    for (int64_t k0 = 0; k0 < a.cols; k0 += kTileK) {
        stash();
        __syncthreads();
        if (k0 + kTileK < a.cols) fetch(k0 + kTileK);
        for (int kk = 0; kk < kTileK; kk += 16) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[2];
            for (int n = 0; n < 2; ++n) wmma::load_matrix_sync(b[n], &stage.w[warp * 32 + n * 16][kk], kLd);
            for (int m = 0; m < 2; ++m) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> hi, lo;
                wmma::load_matrix_sync(hi, &stage.hi[m * 16][kk], kLd);
                wmma::load_matrix_sync(lo, &stage.lo[m * 16][kk], kLd);
                for (int n = 0; n < 2; ++n) {
                    wmma::mma_sync(acc[m][n], hi, b[n], acc[m][n]);
                    wmma::mma_sync(acc[m][n], lo, b[n], acc[m][n]);
                }
            }
        }
        __syncthreads();
    }

    float(*result)[kOutLd] = reinterpret_cast<float(*)[kOutLd]>(shared);
    for (int m = 0; m < 2; ++m)
        for (int n = 0; n < 2; ++n)
            wmma::store_matrix_sync(&result[m * 16][warp * 32 + n * 16], acc[m][n], kOutLd, wmma::mem_row_major);
    __syncthreads();
    for (int i = t; i < kTileRows * kTileOut; i += kThreads) {
        const int r = i / kTileOut, c = i % kTileOut;
        if (r < tile.count && out0 + c < a.rows) a.out[(int64_t(tile.first_row) + r) * a.rows + out0 + c] = result[r][c];
    }
}

}  // namespace

void grouped_split_products(const void* const* experts, int64_t rows, int64_t cols, bool vectors,
                            const ExpertRowTile* tiles, const int32_t* tile_count, int64_t max_tiles,
                            const uint16_t* hi, const uint16_t* lo, float* out, cudaStream_t stream) {
    if (max_tiles == 0 || rows == 0) return;
    const dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>((rows + kTileOut - 1) / kTileOut));
    const GroupedArgs args{experts, rows, cols, tiles, tile_count, hi, lo, out};
    if (vectors) {
        grouped_split_kernel<true><<<grid, kThreads, 0, stream>>>(args);
    } else {
        grouped_split_kernel<false><<<grid, kThreads, 0, stream>>>(args);
    }
    DUET_CUDA_CHECK_LAUNCH("grouped_split_kernel");
}

}  // namespace duet::cuda
