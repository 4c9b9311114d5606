// Small host-to-device copies queued without waiting for the stream. A copy from pageable host
// memory (cudaMemcpyAsync) first waits for the stream's queued work, so each of a prompt's small
// uploads (token ids, the experts' groups) left the device idle until the host had queued more;
// staged through pinned memory, the copy is queued behind that work instead. A staging chunk is used
// again once the copy that last read it has run (its event).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace duet {

class PinnedStaging {
public:
    explicit PinnedStaging(cudaStream_t stream) : stream_(stream) {}
    PinnedStaging(const PinnedStaging&) = delete;
    PinnedStaging& operator=(const PinnedStaging&) = delete;
    ~PinnedStaging();

    // Queues a copy of `bytes` from `host` to `device` on the stream; `host` may be reused at once.
    // Large copies, and copies while the stream is being recorded (a recorded copy would read the
    // staging chunk again at every replay), go straight from `host`.
    void upload(void* device, const void* host, size_t bytes);

private:
    static constexpr size_t kLargest = size_t(1) << 20;      // bytes staged at most
    static constexpr size_t kChunkBytes = size_t(64) << 10;  // the least a chunk holds
    static constexpr size_t kMaxChunks = 256;                // then the oldest copy is waited for

    struct Chunk {
        void* data = nullptr;
        size_t bytes = 0;
        cudaEvent_t copied = nullptr;  // recorded after the copy that last read the chunk
    };
    Chunk& free_chunk(size_t bytes);

    cudaStream_t stream_;
    std::vector<Chunk> chunks_;
    size_t next_ = 0;  // the chunk waited for when all are in use
};

}  // namespace duet
