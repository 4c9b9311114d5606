#include "backend/cuda/tensor_core_products.h"

#include <algorithm>

#include "base/error.h"

namespace duet {

namespace {

void check(cublasStatus_t status, const char* call) {
    require(status == CUBLAS_STATUS_SUCCESS, "cuBLAS call ", call, " failed with status ", static_cast<int>(status));
}

// The handle's own mode is pedantic (exact f32 products); bf16 inputs need the default mode to
// reach the tensor cores, and lose nothing by it: products of bf16 are exact in f32.
class DefaultMathScope {
public:
    explicit DefaultMathScope(cublasHandle_t cublas) : cublas_(cublas) {
        check(cublasGetMathMode(cublas_, &saved_), "cublasGetMathMode");
        check(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    }
    ~DefaultMathScope() { cublasSetMathMode(cublas_, saved_); }

private:
    cublasHandle_t cublas_;
    cublasMath_t saved_{};
};

}  // namespace

void split_bf16_gemm(cublasHandle_t cublas, const void* w, int64_t rows, int64_t cols, const uint16_t* hi,
                     const uint16_t* lo, int64_t n, float* out, int64_t ldc) {
    if (rows == 0 || n == 0) return;
    DefaultMathScope scope(cublas);
    const float one = 1.0f, zero = 0.0f;
    const uint16_t* halves[2] = {hi, lo};
    for (int half = 0; half < 2; ++half) {
        // Column-major view: out [rows, n] (ld ldc) = W^T-as-stored [rows, cols] · x [cols, n].
        check(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                           static_cast<int>(cols), &one, w, CUDA_R_16BF, static_cast<int>(cols), halves[half],
                           CUDA_R_16BF, static_cast<int>(cols), half == 0 ? &zero : &one, out, CUDA_R_32F,
                           static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
    }
}

ExpertGroups group_by_expert(const std::vector<int32_t>& chosen, int64_t experts, int64_t k) {
    ExpertGroups g;
    g.offset.assign(static_cast<size_t>(experts + 1), 0);
    for (int32_t e : chosen) {
        require(e >= 0 && e < experts, "expert routing chose expert ", e, " of ", experts);
        ++g.offset[static_cast<size_t>(e) + 1];
    }
    for (int64_t e = 0; e < experts; ++e) g.offset[e + 1] += g.offset[e];
    std::vector<int64_t> cursor(g.offset.begin(), g.offset.end() - 1);
    g.row_of_slot.resize(chosen.size());
    g.token_of_row.resize(chosen.size());
    for (size_t s = 0; s < chosen.size(); ++s) {
        const int64_t row = cursor[static_cast<size_t>(chosen[s])]++;
        g.row_of_slot[s] = static_cast<int32_t>(row);
        g.token_of_row[static_cast<size_t>(row)] = static_cast<int32_t>(static_cast<int64_t>(s) / k);
    }
    return g;
}

std::vector<cuda::ExpertRowTile> expert_row_tiles(const ExpertGroups& groups) {
    std::vector<cuda::ExpertRowTile> tiles;
    for (size_t e = 0; e + 1 < groups.offset.size(); ++e) {
        for (int64_t row = groups.offset[e]; row < groups.offset[e + 1]; row += cuda::kExpertTileRows) {
            const int64_t count = std::min<int64_t>(cuda::kExpertTileRows, groups.offset[e + 1] - row);
            tiles.push_back({static_cast<int32_t>(e), static_cast<int32_t>(row), static_cast<int32_t>(count)});
        }
    }
    return tiles;
}

}  // namespace duet
