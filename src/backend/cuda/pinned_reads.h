// Small device-to-host copies queued without waiting for them (Backend::read_ints_later): each lands
// in pinned memory behind the stream's work so far, and await() waits for the last of them only,
// not for what was queued on the stream after it, then hands the values to their host addresses.
// A speech frame is read this way while the next frame's step is already queued.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace duet {

class PinnedReads {
public:
    explicit PinnedReads(cudaStream_t stream) : stream_(stream) {}
    PinnedReads(const PinnedReads&) = delete;
    PinnedReads& operator=(const PinnedReads&) = delete;
    ~PinnedReads();

    // Queues a copy of `bytes` from `device` on the stream; `host` receives them in await().
    void read_later(void* host, const void* device, size_t bytes);
    // Waits for the copies queued since the last await() and hands their bytes over.
    void await();

private:
    struct Pending {
        void* host = nullptr;
        size_t offset = 0;
        size_t bytes = 0;
    };
    void reserve(size_t bytes);

    cudaStream_t stream_;
    uint8_t* pinned_ = nullptr;
    size_t capacity_ = 0;
    size_t used_ = 0;
    cudaEvent_t copied_ = nullptr;  // recorded after the last queued copy
    std::vector<Pending> pending_;
};

}  // namespace duet
