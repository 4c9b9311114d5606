// Turns CUDA runtime status codes into duet::Error, so a failed CUDA call is
// reported like every other failure: one line naming the call, where it was
// made and what the runtime said.
#pragma once

#include <cuda_runtime_api.h>

#include "base/error.h"

namespace duet::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                          int line) {
    fail("CUDA call ", call, " failed at ", file, ":", line, ": ", cudaGetErrorString(status), " (",
         cudaGetErrorName(status), ")");
}

inline void check(cudaError_t status, const char* call, const char* file, int line) {
    if (status != cudaSuccess) throw_cuda_error(status, call, file, line);
}

}  // namespace duet::cuda

// Evaluates a CUDA runtime call once and throws duet::Error when it does not
// return cudaSuccess.
#define DUET_CUDA_CHECK(call) ::duet::cuda::check((call), #call, __FILE__, __LINE__)

// Checks the kernel launch just made. cudaGetLastError (not the peek variant)
// is used so that a non-sticky launch error, such as a bad configuration, is
// cleared and does not resurface at an unrelated later call.
#define DUET_CUDA_CHECK_LAUNCH(kernel_name) \
    ::duet::cuda::check(cudaGetLastError(), "launch of " kernel_name, __FILE__, __LINE__)
