// Matrix products on the CPU, the engine's hot path.
//
// Summation order: every output element out[t, r] is one dot product computed
// by one thread, in an order fixed by the active SimdLevel alone: lane l of a
// single vector accumulator takes the columns c = l (mod width) in increasing
// order with fused multiply-adds, the lanes are then summed in a fixed tree,
// and the columns past the last full vector are added one by one. Neither the
// thread count, nor the number of tokens in the call, nor which rows share a
// register tile changes that order, so
//   - results are bit-identical for any pool size, and
//   - a token computed inside a batch (prefill) gives bit-identical results to
//     the same token computed alone with n == 1 (decode).
// Different SimdLevels use different vector widths and may differ in the last
// bits.
#pragma once

#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "kernels/cpu/simd_level.h"
#include "tensor/matrix.h"

namespace duet::cpu {

// out[t, r] = sum over c of x[t, c] * w[r, c], for t < n and r < w.rows.
// x is [n, w.cols] and out is [n, w.rows], both row-major f32, and must not
// overlap. Accumulates in f32. pool may be null (runs on the calling thread).
void matmul(const MatrixView& w, const float* x, int64_t n, float* out, ThreadPool* pool);

// One of several independent products run together: out [n, w.rows] = x [n, w.cols] · wᵀ.
struct Product {
    MatrixView w;
    const float* x = nullptr;
    int64_t n = 0;
    float* out = nullptr;
};

// Several products (a layer's projections of one input, a mixture's chosen experts) as one job on
// the pool: each gives exactly what matmul gives for it alone, but the threads are woken and
// joined once for all of them, and a thread that finishes one product's share goes on to the
// next instead of waiting for the others. No output may overlap another product's input or output.
void matmul_many(std::span<const Product> products, ThreadPool* pool);

// sum of a[i] * b[i] over i < n.
float dot_f32(const float* a, const float* b, int64_t n);

// y[i] += a * x[i] for i < n.
void axpy_f32(float a, const float* x, float* y, int64_t n);

}  // namespace duet::cpu
