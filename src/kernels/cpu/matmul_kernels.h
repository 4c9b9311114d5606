// The per-instruction-set kernels behind matmul.h, one table per SimdLevel.
// Each table lives in a source file compiled for its instruction set, so only
// these function pointers may cross from generic code into it.
#pragma once

#include <cstdint>

#include "tensor/matrix.h"

namespace duet::cpu::detail {

// Rows handled together by one register tile of the batched kernel.
constexpr int64_t kTileRows = 4;

// Rows one token's product streams together, each from its own accumulator: more
// rows are more streams in flight from memory. On a 2-core AVX-512 AMD EPYC
// machine a 55 MB bf16 product ran 3-13 % faster with 8 than with 4 on two
// threads (11 of 12 alternated rounds) and about 8 % on one; 2 was a third
// slower, 12 and 16 no faster than 8. Eight accumulators, x and a weight
// vector still fit AVX2's 16 registers.
constexpr int64_t kStreamRows = 8;

// Tokens handled together by one register tile of the batched kernel.
// kTileRows x kTileTokens accumulators plus kTileTokens token vectors and one
// weight vector must fit the 16 vector registers of AVX2.
constexpr int64_t kTileTokens = 3;

// Tokens the batched kernel takes through one block of weight rows. Every
// token block reads the whole weight matrix again, which costs less than
// streaming a larger token block from beyond L2 for each block of rows.
constexpr int64_t kTokenBlock = 96;

struct MatmulKernels {
    // One token: out[r] for r in [row_begin, row_end).
    void (*matvec)(const MatrixView& w, const float* x, float* out, int64_t row_begin,
                   int64_t row_end);
    // n tokens of x (rows of w.cols values, x_token_stride apart) into out
    // ([n, w.rows]), rows [row_begin, row_end).
    void (*matmul)(const MatrixView& w, const float* x, int64_t x_token_stride, int64_t n, float* out,
                   int64_t row_begin, int64_t row_end);
    float (*dot)(const float* a, const float* b, int64_t n);
    void (*axpy)(float a, const float* x, float* y, int64_t n);
};

extern const MatmulKernels kScalarKernels;
extern const MatmulKernels kAvx2Kernels;
extern const MatmulKernels kAvx512Kernels;

}  // namespace duet::cpu::detail
