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

// Tokens handled together by one register tile. kTileRows x kTileTokens
// accumulators plus kTileTokens token vectors and one weight vector must fit
// the 16 vector registers of AVX2.
constexpr int64_t kTileTokens = 3;

// Columns a batched tile covers before it moves to the next tokens: the slice
// of a widened weight block (kTileRows x this many f32) then stays in L1 while
// every token of the block passes by it.
constexpr int64_t kColumnBlock = 512;

// The dot products of the matmul are built only by the two functions below,
// whatever the tile shape and however the columns are blocked, which is what
// fixes their summation order.
//
// acc[r][t] += w row r times x row t over columns [begin, end): lane l takes
// the columns c = l (mod width) in increasing order. begin and end are
// multiples of the vector width; rows of w and of x are `cols` apart.
template <class Ops, class Weight, int Rows, int Tokens>
inline void accumulate_tile(const Weight* w, const float* x, int64_t cols, int64_t begin,
                            int64_t end, typename Ops::Vec (&acc)[Rows][Tokens]) {
    using Vec = typename Ops::Vec;
    for (int64_t c = begin; c < end; c += Ops::kWidth) {
        Vec xv[Tokens];
#pragma GCC unroll 16
        for (int t = 0; t < Tokens; ++t) xv[t] = Ops::load(x + t * cols + c);
#pragma GCC unroll 16
        for (int r = 0; r < Rows; ++r) {
            const Vec wv = Ops::load(w + r * cols + c);
#pragma GCC unroll 16
            for (int t = 0; t < Tokens; ++t) acc[r][t] = Ops::fma(wv, xv[t], acc[r][t]);
        }
    }
}

// out[t * out_token_stride + r] = the lanes of acc[r][t] summed in Ops' fixed
// order, then the columns from `full` (the last multiple of the width) to
// `cols` added one at a time.
template <class Ops, class Weight, int Rows, int Tokens>
inline void finish_tile(const Weight* w, const float* x, int64_t cols, int64_t full,
                        const typename Ops::Vec (&acc)[Rows][Tokens], float* out,
                        int64_t out_token_stride) {
    for (int r = 0; r < Rows; ++r) {
        for (int t = 0; t < Tokens; ++t) {
            float s = Ops::sum(acc[r][t]);
            for (int64_t c = full; c < cols; ++c) {
                s = Ops::fma(Ops::widen(w[r * cols + c]), x[t * cols + c], s);
            }
            out[t * out_token_stride + r] = s;
        }
    }
}

template <class Ops, int Rows, int Tokens>
inline void zero_tile(typename Ops::Vec (&acc)[Rows][Tokens]) {
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 16
        for (int t = 0; t < Tokens; ++t) acc[r][t] = Ops::zero();
    }
}

// Rows whole dot products of one token, in registers from start to end.
template <class Ops, class Weight, int Rows>
inline void matvec_tile(const Weight* w, const float* x, int64_t cols, float* out) {
    const int64_t full = cols - cols % Ops::kWidth;
    typename Ops::Vec acc[Rows][1];
    zero_tile<Ops, Rows, 1>(acc);
    accumulate_tile<Ops, Weight, Rows, 1>(w, x, cols, 0, full, acc);
    finish_tile<Ops, Weight, Rows, 1>(w, x, cols, full, acc, out, 0);
}

// One token against rows [row_begin, row_end), kTileRows at a time: the
// weights stream from memory once, with kTileRows independent accumulator
// chains to hide the fma latency.
template <class Ops, class Weight>
void matvec_rows(const Weight* w, int64_t cols, const float* x, float* out, int64_t row_begin,
                 int64_t row_end) {
    int64_t r = row_begin;
    for (; r + kTileRows <= row_end; r += kTileRows) {
        matvec_tile<Ops, Weight, kTileRows>(w + r * cols, x, cols, out + r);
    }
    for (; r < row_end; ++r) matvec_tile<Ops, Weight, 1>(w + r * cols, x, cols, out + r);
}

// The rows of a block as f32: bf16 is widened into scratch once per block and
// then reused by every token; f32 rows are used in place.
template <class Ops>
const float* rows_as_f32(const float* w, int64_t, float*) {
    return w;
}

template <class Ops>
const float* rows_as_f32(const uint16_t* w, int64_t count, float* scratch) {
    int64_t i = 0;
    for (; i + Ops::kWidth <= count; i += Ops::kWidth) Ops::store(scratch + i, Ops::load(w + i));
    for (; i < count; ++i) scratch[i] = Ops::widen(w[i]);
    return scratch;
}

// One column block [begin, end) of a Rows x Tokens tile. Between column blocks
// the accumulators wait in `saved` (Rows x Tokens vectors), stored and
// reloaded exactly, so the blocking does not change any sum.
template <class Ops, int Rows, int Tokens>
inline void batched_tile_step(const float* block, const float* x, int64_t cols, int64_t begin,
                              int64_t end, int64_t full, float* saved, float* out,
                              int64_t out_token_stride) {
    typename Ops::Vec acc[Rows][Tokens];
    if (begin == 0) {
        zero_tile<Ops, Rows, Tokens>(acc);
    } else {
#pragma GCC unroll 16
        for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 16
            for (int t = 0; t < Tokens; ++t) acc[r][t] = Ops::load(saved + (t * Rows + r) * Ops::kWidth);
        }
    }
    accumulate_tile<Ops, float, Rows, Tokens>(block, x, cols, begin, end, acc);
    if (end == full) {
        finish_tile<Ops, float, Rows, Tokens>(block, x, cols, full, acc, out, out_token_stride);
    } else {
#pragma GCC unroll 16
        for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 16
            for (int t = 0; t < Tokens; ++t) Ops::store(saved + (t * Rows + r) * Ops::kWidth, acc[r][t]);
        }
    }
}

// Tokens [token_begin, token_end) against a block of Rows f32 weight rows,
// one column block at a time. saved holds Rows x (token_end - token_begin)
// vectors.
template <class Ops, int Rows>
void block_times_tokens(const float* block, int64_t cols, const float* x, int64_t token_begin,
                        int64_t token_end, float* out, int64_t out_token_stride, float* saved) {
    static_assert(kColumnBlock % Ops::kWidth == 0, "column blocks must hold whole vectors");
    const int64_t full = cols - cols % Ops::kWidth;
    int64_t begin = 0;
    do {
        const int64_t end = full - begin < kColumnBlock ? full : begin + kColumnBlock;
        int64_t t = token_begin;
        for (; t + kTileTokens <= token_end; t += kTileTokens) {
            batched_tile_step<Ops, Rows, kTileTokens>(
                block, x + t * cols, cols, begin, end, full,
                saved + (t - token_begin) * Rows * Ops::kWidth, out + t * out_token_stride,
                out_token_stride);
        }
        for (; t < token_end; ++t) {
            batched_tile_step<Ops, Rows, 1>(block, x + t * cols, cols, begin, end, full,
                                            saved + (t - token_begin) * Rows * Ops::kWidth,
                                            out + t * out_token_stride, out_token_stride);
        }
        begin = end;
    } while (begin < full);
}

template <class Ops, class Weight>
void matmul_rows(const Weight* w, int64_t rows, int64_t cols, const float* x, int64_t token_begin,
                 int64_t token_end, float* out, int64_t row_begin, int64_t row_end,
                 float* scratch) {
    float* widened = scratch;
    float* saved = scratch + kTileRows * cols;
    for (int64_t r = row_begin; r < row_end; r += kTileRows) {
        const int64_t block_rows = row_end - r < kTileRows ? row_end - r : kTileRows;
        const float* block = rows_as_f32<Ops>(w + r * cols, block_rows * cols, widened);
        if (block_rows == kTileRows) {
            block_times_tokens<Ops, kTileRows>(block, cols, x, token_begin, token_end, out + r,
                                               rows, saved);
        } else {
            for (int64_t i = 0; i < block_rows; ++i) {
                block_times_tokens<Ops, 1>(block + i * cols, cols, x, token_begin, token_end,
                                           out + r + i, rows, saved);
            }
        }
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
void matmul_kernel(const MatrixView& w, const float* x, int64_t token_begin, int64_t token_end,
                   float* out, int64_t row_begin, int64_t row_end, float* scratch) {
    if (w.dtype == DType::BF16) {
        matmul_rows<Ops>(static_cast<const uint16_t*>(w.data), w.rows, w.cols, x, token_begin,
                         token_end, out, row_begin, row_end, scratch);
    } else {
        matmul_rows<Ops>(static_cast<const float*>(w.data), w.rows, w.cols, x, token_begin,
                         token_end, out, row_begin, row_end, scratch);
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
