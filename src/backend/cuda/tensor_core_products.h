// Long prompts' products on tensor cores. Activations stay f32 in the model; each is split into a
// bf16 pair hi + lo (cuda::split_rows_bf16) and the bf16 weights are multiplied with both halves,
// accumulating in f32: about 16 bits of the activation survive (vs 8 for plain bf16), close to the
// f32 product the CPU computes, at tensor-core speed. Mixtures of experts are run grouped: the
// tokens each expert was chosen for are gathered, and every expert's rows are multiplied in one
// launch per matrix kind (cuda::grouped_split_products).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/ops.h"

namespace duet {

// out[r, :n_rows] (row-major, row stride ldc) = (hi + lo)[r] · wᵀ for r < n, w bf16 [rows, cols].
void split_bf16_gemm(cublasHandle_t cublas, const void* w, int64_t rows, int64_t cols, const uint16_t* hi,
                     const uint16_t* lo, int64_t n, float* out, int64_t ldc);

// The slots of n tokens × k chosen experts, ordered by expert: expert e's rows are
// [offset[e], offset[e + 1]); slot s (token s / k) lands on row row_of_slot[s], and row r holds
// token token_of_row[r].
struct ExpertGroups {
    std::vector<int64_t> offset;
    std::vector<int32_t> row_of_slot, token_of_row;
};
ExpertGroups group_by_expert(const std::vector<int32_t>& chosen, int64_t experts, int64_t k);

// The groups cut into tiles of at most cuda::kExpertTileRows rows, an expert's tiles together.
std::vector<cuda::ExpertRowTile> expert_row_tiles(const ExpertGroups& groups);

}  // namespace duet
