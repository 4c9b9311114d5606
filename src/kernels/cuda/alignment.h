// The alignment the kernels' 16-byte vector loads need. Host-only header.
#pragma once

#include <cstdint>

namespace duet::cuda {

// Whether `p` sits on a 16-byte boundary (a float4 or 8 bf16).
inline bool aligned_16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace duet::cuda
