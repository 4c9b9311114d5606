#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <vector>

#include "base/aligned_vector.h"
#include "base/error.h"
#include "kernels/cpu/matmul_kernels.h"

namespace duet::cpu {

namespace {

using detail::kTileRows;

// Below these sizes a chunk of work costs less than waking a thread for it.
constexpr int64_t kMinBytesPerChunk = 64 * 1024;
constexpr int64_t kMinMultiplyAddsPerChunk = 256 * 1024;

// Several products in one job come in chunks of uneven cost (a mixture's experts serve different
// numbers of tokens), and the job ends with its slowest thread: finer chunks even that out. A
// mixture of a3b's shapes (8 of 256 experts and a shared one) over 64 tokens took 46.8-53.2 ms with
// 16 chunks a thread against 52.9-55.5 with 4 on a 2-core AVX-512 AMD EPYC machine, one token the
// same; single products were no faster with 16.
constexpr int kChunksPerThreadOfMany = 16;

const detail::MatmulKernels& active_kernels() {
    switch (active_simd_level()) {
        case SimdLevel::Avx512: return detail::kAvx512Kernels;
        case SimdLevel::Avx2: return detail::kAvx2Kernels;
        case SimdLevel::Scalar: break;
    }
    return detail::kScalarKernels;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

// How one product's work falls into units. One token: groups of kStreamRows weight rows, at least
// kMinBytesPerChunk of weights a unit. Several: blocks of kTileRows rows for each block of tokens, at
// least kMinMultiplyAddsPerChunk a unit, numbered with the row block fastest so that a thread's
// consecutive units share the token block in its cache.
struct UnitLayout {
    int64_t rows_per_unit = 0;
    int64_t row_units = 0;
    int64_t token_blocks = 0;
    int64_t tokens_per_block = 0;

    int64_t units() const { return row_units * token_blocks; }
};

UnitLayout unit_layout(const Product& p) {
    UnitLayout l;
    const int64_t cols = std::max<int64_t>(p.w.cols, 1);
    if (p.n == 1) {
        const int64_t group_bytes = detail::kStreamRows * cols * static_cast<int64_t>(dtype_size(p.w.dtype));
        l.rows_per_unit = detail::kStreamRows * std::max<int64_t>(1, kMinBytesPerChunk / group_bytes);
        l.token_blocks = 1;
        l.tokens_per_block = 1;
    } else {
        // Token blocks of about equal size, a multiple of the tile where possible.
        l.token_blocks = ceil_div(p.n, detail::kTokenBlock);
        l.tokens_per_block = ceil_div(ceil_div(p.n, l.token_blocks), detail::kTileTokens) * detail::kTileTokens;
        const int64_t tile_multiply_adds = kTileRows * cols * l.tokens_per_block;
        l.rows_per_unit = kTileRows * std::max<int64_t>(1, kMinMultiplyAddsPerChunk / tile_multiply_adds);
    }
    l.row_units = ceil_div(p.w.rows, l.rows_per_unit);
    return l;
}

// Units [first_row_unit, last_row_unit) of one token block of product p.
void run_units(const detail::MatmulKernels& kernels, const Product& p, const UnitLayout& l, int64_t token_block,
               int64_t first_row_unit, int64_t last_row_unit) {
    const int64_t row_begin = first_row_unit * l.rows_per_unit;
    const int64_t row_end = std::min(p.w.rows, last_row_unit * l.rows_per_unit);
    if (p.n == 1) {
        kernels.matvec(p.w, p.x, p.out, row_begin, row_end);
        return;
    }
    const int64_t token_begin = token_block * l.tokens_per_block;
    const int64_t tokens = std::min(p.n, token_begin + l.tokens_per_block) - token_begin;
    const TokenRows rows = on_cache_lines(p.x + token_begin * p.w.cols, p.w.cols, tokens);
    kernels.matmul(p.w, rows.x, rows.stride, tokens, p.out + token_begin * p.w.rows, row_begin, row_end);
}

void check_product(const Product& p) {
    require_matmul_dtype(p.w);
    require(p.w.rows >= 0 && p.w.cols >= 0 && p.n >= 0, "matmul: negative shape [", p.w.rows, ", ", p.w.cols,
            "] x ", p.n, " tokens");
    if (p.n == 0 || p.w.rows == 0) return;
    require(p.w.cols == 0 || (p.w.data != nullptr && p.x != nullptr), "matmul: null data");
    require(p.out != nullptr, "matmul: null output");
}

}  // namespace

void matmul(const MatrixView& w, const float* x, int64_t n, float* out, ThreadPool* pool) {
    const Product product{w, x, n, out};
    matmul_many(std::span(&product, 1), pool);
}

void matmul_many(std::span<const Product> products, ThreadPool* pool) {
    // Every product's units numbered one after another: product i's start at first_unit[i].
    std::vector<UnitLayout> layouts;
    std::vector<int64_t> first_unit;
    layouts.reserve(products.size());
    first_unit.reserve(products.size() + 1);
    int64_t units = 0;
    for (const Product& p : products) {
        check_product(p);
        first_unit.push_back(units);
        layouts.push_back(p.n == 0 || p.w.rows == 0 ? UnitLayout{} : unit_layout(p));
        units += layouts.back().units();
    }
    first_unit.push_back(units);

    const detail::MatmulKernels& kernels = active_kernels();
    parallel_for(pool, units, 1, [&](int64_t begin, int64_t end) {
        size_t i = static_cast<size_t>(std::upper_bound(first_unit.begin(), first_unit.end(), begin) -
                                       first_unit.begin()) - 1;
        for (int64_t unit = begin; unit < end;) {
            while (unit >= first_unit[i + 1]) ++i;
            const UnitLayout& l = layouts[i];
            const int64_t local = unit - first_unit[i];
            const int64_t token_block = local / l.row_units;
            const int64_t first_row_unit = local % l.row_units;
            const int64_t last_row_unit = std::min(l.row_units, first_row_unit + (end - unit));
            run_units(kernels, products[i], l, token_block, first_row_unit, last_row_unit);
            unit += last_row_unit - first_row_unit;
        }
    }, products.size() > 1 ? kChunksPerThreadOfMany : ThreadPool::kChunksPerThread);
}

float dot_f32(const float* a, const float* b, int64_t n) { return active_kernels().dot(a, b, n); }

void axpy_f32(float a, const float* x, float* y, int64_t n) { active_kernels().axpy(a, x, y, n); }

}  // namespace duet::cpu
