#include "backend/cuda/f32_products.h"

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"

namespace duet::cuda {

void check_cublas(cublasStatus_t status, const char* call) {
    require(status == CUBLAS_STATUS_SUCCESS, "cuBLAS call ", call, " failed (status ", static_cast<int>(status), ")");
}

float* grown(DeviceBuffer& buffer, int64_t floats) {
    const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
    if (buffer.size_bytes() < bytes) buffer = DeviceBuffer(bytes);
    return buffer.as<float>();
}

F32Products::F32Products() {
    DUET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    check_cublas(cublasSetStream(handle_, stream_), "cublasSetStream");
    check_cublas(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
}

F32Products::~F32Products() {
    if (handle_ != nullptr) cublasDestroy(handle_);
    if (stream_ != nullptr) {
        cudaStreamSynchronize(stream_);
        cudaStreamDestroy(stream_);
    }
}

void F32Products::product(const float* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y) const {
    const float one = 1.0f, zero = 0.0f;
    // In cuBLAS's column-major terms, yᵀ = W · xᵀ.
    check_cublas(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                             static_cast<int>(cols), &one, w, static_cast<int>(cols), x, static_cast<int>(cols), &zero,
                             y, static_cast<int>(rows)),
                 "cublasSgemm");
}

}  // namespace duet::cuda
