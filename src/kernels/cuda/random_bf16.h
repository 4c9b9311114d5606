// Random bf16 tensors made on the GPU: the values RandomTensorWriter makes on the host, bit for
// bit (both use base/counter_random.h). Host-only header: callable from plain C++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace duet::cuda {

// out[i] = counter_random::uniform_bf16(key, i, lo, hi) for i < count, on `stream`.
//   out: `count` bf16 bit patterns, device memory (any 2-byte alignment)
// Asynchronous: launch errors throw duet::Error, faults surface at the next synchronising call.
void fill_uniform_bf16(uint16_t* out, int64_t count, uint64_t key, float lo, float hi, cudaStream_t stream);

}  // namespace duet::cuda
