// Long prompts' products on tensor cores. Activations stay f32 in the model; each is split into a
// bf16 pair hi + lo (cuda::split_rows_bf16) and the bf16 weights are multiplied with both halves,
// accumulating in f32: about 16 bits of the activation survive (vs 8 for plain bf16), close to the
// f32 product the CPU computes, at tensor-core speed. Mixtures of experts are run grouped: the
// tokens each expert was chosen for are gathered (cuda::group_slots_by_expert), and every expert's
// rows are multiplied in one launch per matrix kind (cuda::grouped_split_products).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace duet {

// out[r, :n_rows] (row-major, row stride ldc) = (hi + lo)[r] · wᵀ for r < n, w bf16 [rows, cols].
void split_bf16_gemm(cublasHandle_t cublas, const void* w, int64_t rows, int64_t cols, const uint16_t* hi,
                     const uint16_t* lo, int64_t n, float* out, int64_t ldc);

}  // namespace duet
