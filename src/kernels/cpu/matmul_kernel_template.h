// The matmul, dot and axpy kernels, written once over a vector-operations type
// and compiled once per instruction set by matmul_scalar.cpp, matmul_avx2.cpp
// and matmul_avx512.cpp, so every level has the same structure and the same
// summation order (described in matmul.h).
//
// The Ops type provides:
//   Vec, kWidth                  a vector of kWidth floats
//   zero(), broadcast(float)
//   load(const float*), load(const uint16_t* bf16), store(float*, Vec)
//   add(Vec, Vec), fma(Vec a, Vec b, Vec c) = a * b + c, rounded once
//   sum(Vec)                     the lanes added in a fixed order
//   fma(float, float, float), widen(float), widen(uint16_t bf16)
//
// Include this only from those files, after defining Ops in an unnamed
// namespace: every function here is then a template over a type with internal
// linkage, so each instruction set gets its own private copy and the linker
// can never hand generic code a copy built for a wider instruction set. For
// the same reason nothing here calls an inline function from another header.
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul_kernels.h"

namespace duet::cpu::detail {

// How far ahead of its loads a row streamed from memory asks for its weights
// (one token's product reads every weight once, in row order), and into which
// cache. The hardware prefetchers alone left a core at about half of what it
// can read. On a 2-core AVX-512 AMD EPYC machine, one token's 55 MB bf16
// product (10304 x 2688) through cpu::matmul ran at 15.8-18.3 GB/s on one
// thread and 29.5-35.8 on two; asking 1 KiB ahead into L1, 18.7-21.9 and
// 37.6-42.8; asking 2 KiB ahead into L2 (prefetcht1: the request does not hold
// one of the core's few L1 miss buffers until the line arrives), another 4-17 %
// in eight rounds alternated with the L1 form on two threads, 0-17 % on one
// (22.4-26.6 GB/s). 3 and 4 KiB ahead were slower than 2.
constexpr int64_t kPrefetchBytes = 2048;
constexpr int kPrefetchIntoL2 = 2;  // __builtin_prefetch's locality for prefetcht1

// Asks for the line `bytes` past p (a hint: an address past the matrix is never
// read, so the offset is added as an integer, not as a pointer). A template over
// Ops, as everything here, for each instruction set's private copy.
template <class Ops>
inline void prefetch_ahead(const void* p, int64_t bytes) {
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes);
    __builtin_prefetch(reinterpret_cast<const void*>(ahead), 0, kPrefetchIntoL2);
}

// out[t * out_token_stride + r] = dot(w row r, x row t) for r < Rows and
// t < Tokens; rows of w and of x are `cols` apart. Every dot product of the
// matmul is formed here, whatever the tile shape, which fixes its order: lane
// l of one accumulator takes the columns c = l (mod width) in increasing
// order, Ops::sum adds the lanes, and the columns past the last full vector
// follow one at a time. With Stream, the rows come from memory once (one
// token's product) and are asked for kPrefetchBytes ahead, every 32 bytes.
template <class Ops, class Weight, int Rows, int Tokens, bool Stream = false>
inline void dot_tile(const Weight* w, const float* x, int64_t x_token_stride, int64_t cols, float* out,
                     int64_t out_token_stride) {
    using Vec = typename Ops::Vec;
    const int64_t full = cols - cols % Ops::kWidth;

    Vec acc[Rows][Tokens];
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 16
        for (int t = 0; t < Tokens; ++t) acc[r][t] = Ops::zero();
    }

    for (int64_t c = 0; c < full; c += Ops::kWidth) {
        if (Stream && (c * static_cast<int64_t>(sizeof(Weight))) % 32 == 0) {
#pragma GCC unroll 16
            for (int r = 0; r < Rows; ++r) prefetch_ahead<Ops>(w + r * cols + c, kPrefetchBytes);
        }
        Vec xv[Tokens];
#pragma GCC unroll 16
        for (int t = 0; t < Tokens; ++t) xv[t] = Ops::load(x + t * x_token_stride + c);
#pragma GCC unroll 16
        for (int r = 0; r < Rows; ++r) {
            const Vec wv = Ops::load(w + r * cols + c);
#pragma GCC unroll 16
            for (int t = 0; t < Tokens; ++t) acc[r][t] = Ops::fma(wv, xv[t], acc[r][t]);
        }
    }

    for (int r = 0; r < Rows; ++r) {
        for (int t = 0; t < Tokens; ++t) {
            float s = Ops::sum(acc[r][t]);
            for (int64_t c = full; c < cols; ++c) {
                s = Ops::fma(Ops::widen(w[r * cols + c]), x[t * x_token_stride + c], s);
            }
            out[t * out_token_stride + r] = s;
        }
    }
}

// One token against rows [row_begin, row_end), kStreamRows at a time: the
// weights stream from memory once, kStreamRows rows side by side, each with its
// own accumulator chain.
template <class Ops, class Weight>
void matvec_rows(const Weight* w, int64_t cols, const float* x, float* out, int64_t row_begin,
                 int64_t row_end) {
    int64_t r = row_begin;
    for (; r + kStreamRows <= row_end; r += kStreamRows) {
        dot_tile<Ops, Weight, kStreamRows, 1, true>(w + r * cols, x, 0, cols, out + r, 0);
    }
    for (; r < row_end; ++r) dot_tile<Ops, Weight, 1, 1, true>(w + r * cols, x, 0, cols, out + r, 0);
}

// One tile of Tokens tokens against Rows rows, streaming the rows from memory
// when `first` (the first tokens to read them) and from cache after.
template <class Ops, class Weight, int Rows, int Tokens>
inline void token_tile(bool first, const Weight* w, const float* x, int64_t x_token_stride, int64_t cols, float* out,
                       int64_t out_token_stride) {
    if (first) {
        dot_tile<Ops, Weight, Rows, Tokens, true>(w, x, x_token_stride, cols, out, out_token_stride);
    } else {
        dot_tile<Ops, Weight, Rows, Tokens>(w, x, x_token_stride, cols, out, out_token_stride);
    }
}

// Tokens [0, n) against Rows rows, kTileTokens at a time, the weights widened
// in registers: the first group streams the rows from memory, the later ones
// find them in cache (4 bf16 rows of a few thousand columns fit in L1, where
// rows widened to f32 beforehand did not: that form ran at half the speed for
// every token count from 2 to 96, on a 55 MB product with two threads).
template <class Ops, class Weight, int Rows>
void rows_times_tokens(const Weight* w, int64_t cols, const float* x, int64_t x_token_stride, int64_t n, float* out,
                       int64_t out_token_stride) {
    int64_t t = 0;
    for (; t + kTileTokens <= n; t += kTileTokens) {
        token_tile<Ops, Weight, Rows, kTileTokens>(t == 0, w, x + t * x_token_stride, x_token_stride, cols,
                                                   out + t * out_token_stride, out_token_stride);
    }
    static_assert(kTileTokens == 3, "the tail below takes one or two tokens");
    const float* xt = x + t * x_token_stride;
    float* ot = out + t * out_token_stride;
    if (n - t == 2) token_tile<Ops, Weight, Rows, 2>(t == 0, w, xt, x_token_stride, cols, ot, out_token_stride);
    if (n - t == 1) token_tile<Ops, Weight, Rows, 1>(t == 0, w, xt, x_token_stride, cols, ot, out_token_stride);
}

// n tokens (x rows x_token_stride apart) against rows [row_begin, row_end), kTileRows
// rows at a time; out is [n, rows].
template <class Ops, class Weight>
void matmul_rows(const Weight* w, int64_t rows, int64_t cols, const float* x, int64_t x_token_stride, int64_t n,
                 float* out, int64_t row_begin, int64_t row_end) {
    int64_t r = row_begin;
    for (; r + kTileRows <= row_end; r += kTileRows) {
        rows_times_tokens<Ops, Weight, kTileRows>(w + r * cols, cols, x, x_token_stride, n, out + r, rows);
    }
    for (; r < row_end; ++r) {
        rows_times_tokens<Ops, Weight, 1>(w + r * cols, cols, x, x_token_stride, n, out + r, rows);
    }
}

template <class Ops>
void matvec_kernel(const MatrixView& w, const float* x, float* out, int64_t row_begin,
                   int64_t row_end) {
    if (w.dtype == DType::BF16) {
        matvec_rows<Ops>(static_cast<const uint16_t*>(w.data), w.cols, x, out, row_begin, row_end);
    } else {
        matvec_rows<Ops>(static_cast<const float*>(w.data), w.cols, x, out, row_begin, row_end);
    }
}

template <class Ops>
void matmul_kernel(const MatrixView& w, const float* x, int64_t x_token_stride, int64_t n, float* out,
                   int64_t row_begin, int64_t row_end) {
    if (w.dtype == DType::BF16) {
        matmul_rows<Ops>(static_cast<const uint16_t*>(w.data), w.rows, w.cols, x, x_token_stride, n, out,
                         row_begin, row_end);
    } else {
        matmul_rows<Ops>(static_cast<const float*>(w.data), w.rows, w.cols, x, x_token_stride, n, out, row_begin,
                         row_end);
    }
}

// Four accumulators so that consecutive fmas do not wait on each other.
template <class Ops>
float dot_kernel(const float* a, const float* b, int64_t n) {
    using Vec = typename Ops::Vec;
    constexpr int64_t width = Ops::kWidth;
    Vec acc0 = Ops::zero(), acc1 = Ops::zero(), acc2 = Ops::zero(), acc3 = Ops::zero();
    int64_t i = 0;
    for (; i + 4 * width <= n; i += 4 * width) {
        acc0 = Ops::fma(Ops::load(a + i), Ops::load(b + i), acc0);
        acc1 = Ops::fma(Ops::load(a + i + width), Ops::load(b + i + width), acc1);
        acc2 = Ops::fma(Ops::load(a + i + 2 * width), Ops::load(b + i + 2 * width), acc2);
        acc3 = Ops::fma(Ops::load(a + i + 3 * width), Ops::load(b + i + 3 * width), acc3);
    }
    for (; i + width <= n; i += width) acc0 = Ops::fma(Ops::load(a + i), Ops::load(b + i), acc0);
    float s = Ops::sum(Ops::add(Ops::add(acc0, acc1), Ops::add(acc2, acc3)));
    for (; i < n; ++i) s = Ops::fma(a[i], b[i], s);
    return s;
}

template <class Ops>
void axpy_kernel(float a, const float* x, float* y, int64_t n) {
    const typename Ops::Vec av = Ops::broadcast(a);
    int64_t i = 0;
    for (; i + Ops::kWidth <= n; i += Ops::kWidth) {
        Ops::store(y + i, Ops::fma(av, Ops::load(x + i), Ops::load(y + i)));
    }
    for (; i < n; ++i) y[i] = Ops::fma(a, x[i], y[i]);
}

template <class Ops>
constexpr MatmulKernels make_kernels() {
    return MatmulKernels{&matvec_kernel<Ops>, &matmul_kernel<Ops>, &dot_kernel<Ops>,
                         &axpy_kernel<Ops>};
}

}  // namespace duet::cpu::detail
