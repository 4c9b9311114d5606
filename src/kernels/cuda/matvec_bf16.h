// Matrix-vector product with bf16 weights, the shape of every projection in a
// single-token decode step. Host-only header: callable from plain C++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/norm_ahead.h"

namespace duet::cuda {

// y = W·x on `stream`, accumulating in f32.
//   w: [rows, cols] row-major bf16 bit patterns, device memory
//   x: [cols] f32, device memory
//   y: [rows] f32, device memory (must not overlap w or x)
// Uses 16-byte vector loads when cols % 8 == 0 and w and x are 16-byte
// aligned, scalar loads otherwise. Asynchronous: errors in the launch itself
// throw duet::Error, faults during execution surface at the next
// synchronising call. cols == 0 yields zeros; rows == 0 does nothing.
void matvec_bf16(const uint16_t* w, const float* x, float* y, int64_t rows, int64_t cols,
                 cudaStream_t stream);

// The same with the neighbours of a decode step's products folded in: with `norm_weight` (device,
// [cols]) x is RMS-normalised first (x / rms(x) · norm_weight, rms with `eps`); with `add` the
// product is added to y (the residual stream) instead of written, and with `ahead` on the stream's
// next norm is prepared as y is written (norm_ahead.h; y is then the whole stream, [rows]). Needs the
// vector path.
void matvec_bf16_fused(const uint16_t* w, const float* x, const float* norm_weight, float eps, bool add, float* y,
                       int64_t rows, int64_t cols, cudaStream_t stream, const NormAhead& ahead = {});
// Whether matvec_bf16_fused can run on these pointers and width.
bool matvec_bf16_fusable(const uint16_t* w, const float* x, const float* norm_weight, int64_t cols);

// y (+ y when add) = W_a · rmsnorm(x_a) + W_b · rmsnorm(x_b) in one launch, each norm with its own
// weights (device, [cols]) and `eps`; both matrices [rows, cols]. Needs the vector path for both and
// matvec_bf16_pair_normable(cols) (both inputs are normalised into a block's shared memory).
// Input i may instead be row *row_id[i] of the bf16 table table[i] ([.., cols], 16-byte aligned;
// a negative id is a zero row), read in place: one token's embedding, with no gather before. With
// `ahead` on, y's next norm is prepared as y is written (norm_ahead.h).
struct NormedPair {
    const uint16_t* w[2] = {};
    const float* x[2] = {};
    const float* norm_weight[2] = {};
    const uint16_t* table[2] = {};
    const int32_t* row_id[2] = {};
    // The input (0 or 1) written before the launch before this product's began, which the kernel
    // may then read before its wait and stream that half's row while the launch before runs; -1
    // for none. Taken where rows are a whole warp's (1024 columns and more).
    int early = -1;
};
bool matvec_bf16_pair_normable(int64_t cols);
void matvec_bf16_normed_pair(const NormedPair& pair, float eps, bool add, float* y, int64_t rows, int64_t cols,
                             cudaStream_t stream, const NormAhead& ahead = {});

// Several products of one input in one launch: y_i = W_i·x for each matrix of the group, all of
// `cols` columns (a layer's projections of the same normalised input). Needs the vector path for
// every matrix; at most kMatvecGroupMax of them.
constexpr int kMatvecGroupMax = 8;
struct MatvecGroup {
    int count = 0;
    const uint16_t* w[kMatvecGroupMax] = {};
    float* y[kMatvecGroupMax] = {};
    int64_t rows[kMatvecGroupMax] = {};
};
void matvec_bf16_group(const MatvecGroup& group, const float* x, int64_t cols, cudaStream_t stream);

// The same group with its input RMS-normalised first: y_i = W_i · rmsnorm(x), the norm with
// `norm_weight` (device, [cols]) and `eps`. Each block normalises x once into shared memory after
// its wait (no norm launch before the group); needs matvec_bf16_group_normable(cols). With `ahead` on,
// the norm was prepared by the kernel that wrote x (norm_ahead.h), and x itself is not read. With
// `keep` (device, [cols], 16-byte aligned) the launch also stores rmsnorm(x) there, for later readers.
// The dynamic shared memory the normalised input may take: under the 48 KiB a launch gets without
// opting in, with room left for the kernel's own static shared memory (its block sum's partials).
constexpr int64_t kGroupNormedMaxBytes = 47 * 1024;
bool matvec_bf16_group_normable(int64_t cols);
void matvec_bf16_group_normed(const MatvecGroup& group, const float* x, const float* norm_weight, float eps,
                              int64_t cols, cudaStream_t stream, const NormAhead& ahead = {}, float* keep = nullptr);

// A SwiGLU's first products and activation in one launch: y = silu(W_gate · x') · (W_up · x'), x' = x
// or, with `norm_weight`, rmsnorm(x) as in matvec_bf16_group_normed. Both matrices [rows, cols] on the
// vector path. With `ahead` on (and the norm's weights given), rmsnorm(x) was prepared ahead.
void matvec_bf16_swiglu(const uint16_t* gate, const uint16_t* up, const float* x, const float* norm_weight, float eps,
                        float* y, int64_t rows, int64_t cols, cudaStream_t stream, const NormAhead& ahead = {});

}  // namespace duet::cuda
