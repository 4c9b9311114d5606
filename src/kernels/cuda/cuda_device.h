// Which CUDA devices exist and what they are. Host-only header: it can be
// included from files built by the plain C++ compiler.
#pragma once

#include <cstddef>
#include <string>

namespace duet::cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;
    int sm_major = 0;
    int sm_minor = 0;
    size_t total_bytes = 0;
    int multiprocessors = 0;
    // Theoretical DRAM bandwidth from the memory clock and bus width, or 0
    // when the driver does not report them.
    double peak_bandwidth_gbs = 0.0;
};

// Number of usable CUDA devices. Returns 0 rather than throwing when there is
// no driver or no device, so callers can fall back to the CPU path.
int device_count();

// Properties of device `index`; throws duet::Error for an index out of range.
DeviceInfo device_info(int index);

}  // namespace duet::cuda
