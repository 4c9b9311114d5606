#include "backend/cuda/tensor_core_products.h"

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

}  // namespace duet
