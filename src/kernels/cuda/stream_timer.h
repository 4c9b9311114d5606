// Timing work on the GPU: a stream of its own and the two events that bracket one run. Host-only
// header.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace duet::cuda {

class StreamTimer {
public:
    StreamTimer() {
        try {
            DUET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
            DUET_CUDA_CHECK(cudaEventCreate(&start_));
            DUET_CUDA_CHECK(cudaEventCreate(&stop_));
        } catch (...) {
            destroy();  // the destructor does not run for a half-built object
            throw;
        }
    }
    ~StreamTimer() { destroy(); }
    StreamTimer(const StreamTimer&) = delete;
    StreamTimer& operator=(const StreamTimer&) = delete;

    cudaStream_t stream() const { return stream_; }

    // Runs `work` (which enqueues on stream()) `warmups` times untimed, then `runs` times, each
    // timed on its own; the times in ms, in the order run.
    template <typename Work>
    std::vector<double> run_ms(Work&& work, int warmups, int runs) {
        for (int i = 0; i < warmups; ++i) work();
        DUET_CUDA_CHECK(cudaStreamSynchronize(stream_));
        std::vector<double> ms;
        for (int i = 0; i < runs; ++i) {
            DUET_CUDA_CHECK(cudaEventRecord(start_, stream_));
            work();
            DUET_CUDA_CHECK(cudaEventRecord(stop_, stream_));
            DUET_CUDA_CHECK(cudaEventSynchronize(stop_));
            float elapsed = 0.0f;
            DUET_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start_, stop_));
            ms.push_back(elapsed);
        }
        return ms;
    }

private:
    void destroy() noexcept {
        if (stop_ != nullptr) cudaEventDestroy(stop_);
        if (start_ != nullptr) cudaEventDestroy(start_);
        if (stream_ != nullptr) cudaStreamDestroy(stream_);
    }

    cudaStream_t stream_ = nullptr;
    cudaEvent_t start_ = nullptr;
    cudaEvent_t stop_ = nullptr;
};

}  // namespace duet::cuda
