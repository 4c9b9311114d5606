#include "kernels/cpu/matmul.h"

#include <algorithm>

#include "base/aligned_vector.h"
#include "base/error.h"
#include "kernels/cpu/matmul_kernels.h"

namespace duet::cpu {

namespace {

using detail::kTileRows;

// Below these sizes a chunk of work costs less than waking a thread for it.
constexpr int64_t kMinBytesPerChunk = 64 * 1024;
constexpr int64_t kMinMultiplyAddsPerChunk = 256 * 1024;

const detail::MatmulKernels& active_kernels() {
    switch (active_simd_level()) {
        case SimdLevel::Avx512: return detail::kAvx512Kernels;
        case SimdLevel::Avx2: return detail::kAvx2Kernels;
        case SimdLevel::Scalar: break;
    }
    return detail::kScalarKernels;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void matvec(const detail::MatmulKernels& kernels, const MatrixView& w, const float* x, float* out,
            ThreadPool* pool) {
    const int64_t groups = ceil_div(w.rows, detail::kStreamRows);
    const int64_t group_bytes =
        detail::kStreamRows * w.cols * static_cast<int64_t>(dtype_size(w.dtype));
    const int64_t grain =
        std::max<int64_t>(1, kMinBytesPerChunk / std::max<int64_t>(group_bytes, 1));
    parallel_for(pool, groups, grain, [&](int64_t begin, int64_t end) {
        kernels.matvec(w, x, out, begin * detail::kStreamRows, std::min(end * detail::kStreamRows, w.rows));
    });
}

// Token rows for the batched kernel: x itself when every row starts on a cache
// line, else a copy in this thread's scratch with rows padded to whole lines.
// Its 64-byte loads of x then never straddle two lines: for an f32 product
// that was 20-25 % of its time on a 2-core AVX-512 AMD EPYC machine, where a
// block of tokens is read once for each of many row tiles, so copying it once
// costs little.
struct TokenRows {
    const float* x;
    int64_t stride;
};

TokenRows on_cache_lines(const float* x, int64_t cols, int64_t tokens) {
    constexpr int64_t kLineFloats = 64 / sizeof(float);
    if (reinterpret_cast<uintptr_t>(x) % 64 == 0 && cols % kLineFloats == 0) return {x, cols};
    const int64_t stride = ceil_div(cols, kLineFloats) * kLineFloats;
    thread_local CacheAlignedVector<float> scratch;
    if (scratch.size() < static_cast<size_t>(stride * tokens)) scratch.resize(static_cast<size_t>(stride * tokens));
    for (int64_t t = 0; t < tokens; ++t) std::copy(x + t * cols, x + (t + 1) * cols, scratch.data() + t * stride);
    return {scratch.data(), stride};
}

// Work units are (token block, block of kTileRows weight rows), numbered with
// the row block fastest so that a thread's consecutive units share the token
// block in its cache.
void matmul_batched(const detail::MatmulKernels& kernels, const MatrixView& w, const float* x,
                    int64_t n, float* out, ThreadPool* pool) {
    const int64_t row_blocks = ceil_div(w.rows, kTileRows);
    // Token blocks of about equal size, a multiple of the tile where possible.
    const int64_t token_blocks = ceil_div(n, detail::kTokenBlock);
    const int64_t tokens_per_block =
        ceil_div(ceil_div(n, token_blocks), detail::kTileTokens) * detail::kTileTokens;
    const int64_t unit_multiply_adds = kTileRows * std::max<int64_t>(w.cols, 1) * tokens_per_block;
    const int64_t grain = std::max<int64_t>(1, kMinMultiplyAddsPerChunk / unit_multiply_adds);

    parallel_for(pool, row_blocks * token_blocks, grain, [&](int64_t begin, int64_t end) {
        for (int64_t unit = begin; unit < end;) {
            const int64_t token_block = unit / row_blocks;
            const int64_t first_row_block = unit % row_blocks;
            const int64_t last_row_block = std::min(row_blocks, first_row_block + (end - unit));
            const int64_t token_begin = token_block * tokens_per_block;
            const int64_t tokens = std::min(n, token_begin + tokens_per_block) - token_begin;
            const TokenRows rows = on_cache_lines(x + token_begin * w.cols, w.cols, tokens);
            kernels.matmul(w, rows.x, rows.stride, tokens, out + token_begin * w.rows, first_row_block * kTileRows,
                           std::min(w.rows, last_row_block * kTileRows));
            unit += last_row_block - first_row_block;
        }
    });
}

}  // namespace

void matmul(const MatrixView& w, const float* x, int64_t n, float* out, ThreadPool* pool) {
    require_matmul_dtype(w);
    require(w.rows >= 0 && w.cols >= 0 && n >= 0, "matmul: negative shape [", w.rows, ", ",
            w.cols, "] x ", n, " tokens");
    if (n == 0 || w.rows == 0) return;
    require(w.cols == 0 || (w.data != nullptr && x != nullptr), "matmul: null data");
    require(out != nullptr, "matmul: null output");

    const detail::MatmulKernels& kernels = active_kernels();
    if (n == 1) {
        matvec(kernels, w, x, out, pool);
    } else {
        matmul_batched(kernels, w, x, n, out, pool);
    }
}

float dot_f32(const float* a, const float* b, int64_t n) { return active_kernels().dot(a, b, n); }

void axpy_f32(float a, const float* x, float* y, int64_t n) { active_kernels().axpy(a, x, y, n); }

}  // namespace duet::cpu
