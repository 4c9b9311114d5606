// Matrix-vector product with bf16 weights, the shape of every projection in a
// single-token decode step. Host-only header: callable from plain C++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

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

}  // namespace duet::cuda
