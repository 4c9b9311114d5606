// Measured device-memory bandwidth of the current CUDA device: the ceiling
// that memory-bound kernels such as matvec_bf16 are judged against.
// Host-only header. Use buffers well above the L2 size (tens of MB on
// current parts) or the result is cache bandwidth, not DRAM bandwidth.
#pragma once

#include <cstddef>

namespace duet::cuda {

// Device-to-device copy of `bytes`, best of several timed runs, counting the
// bytes read plus the bytes written, in GB/s (1e9 bytes per second).
double measure_device_copy_bandwidth_gbs(size_t bytes);

// A kernel that reads `bytes` (rounded down to a multiple of 16) and reduces
// them to one word, best of several timed runs, in GB/s.
double measure_device_read_bandwidth_gbs(size_t bytes);

}  // namespace duet::cuda
