// A CUDA stream of its own with a cuBLAS handle on it, for plain f32 products computed as the CPU
// computes them (no TF32): what the GPU forms of the Fish codec's decoder and of Transcribe's speech
// encoders, both matched against the CPU's f32 layers, are built on.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/device_buffer.h"

namespace duet::cuda {

class F32Products {
public:
    F32Products();   // a non-blocking stream and a handle on it
    ~F32Products();  // waits for the stream's work first
    F32Products(const F32Products&) = delete;
    F32Products& operator=(const F32Products&) = delete;

    cudaStream_t stream() const { return stream_; }
    cublasHandle_t handle() const { return handle_; }
    // Row-major y [n, rows] = x [n, cols] · Wᵀ, on the stream.
    void product(const float* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y) const;

private:
    cudaStream_t stream_ = nullptr;
    cublasHandle_t handle_ = nullptr;
};

// Throws duet::Error naming `call` unless `status` is success.
void check_cublas(cublasStatus_t status, const char* call);

// `buffer` holding at least `floats` floats; its contents are not kept when it grows. Freeing the old
// block waits for the device, so work still queued on it is safe.
float* grown(DeviceBuffer& buffer, int64_t floats);

}  // namespace duet::cuda
