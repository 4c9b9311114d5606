#include "backend/cuda/pinned_staging.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_check.h"

namespace duet {

PinnedStaging::~PinnedStaging() {
    for (Chunk& c : chunks_) {
        cudaEventSynchronize(c.copied);
        cudaEventDestroy(c.copied);
        cudaFreeHost(c.data);
    }
}

PinnedStaging::Chunk& PinnedStaging::free_chunk(size_t bytes) {
    for (Chunk& c : chunks_) {
        if (c.bytes < bytes) continue;
        const cudaError_t state = cudaEventQuery(c.copied);
        if (state == cudaSuccess) return c;
        if (state != cudaErrorNotReady) DUET_CUDA_CHECK(state);
    }
    if (chunks_.size() >= kMaxChunks) {  // every chunk still in use: wait for one, in turn
        Chunk& c = chunks_[next_++ % chunks_.size()];
        DUET_CUDA_CHECK(cudaEventSynchronize(c.copied));
        if (c.bytes >= bytes) return c;
        DUET_CUDA_CHECK(cudaFreeHost(c.data));
        c.bytes = std::max(bytes, kChunkBytes);
        DUET_CUDA_CHECK(cudaMallocHost(&c.data, c.bytes));
        return c;
    }
    Chunk c;
    c.bytes = std::max(bytes, kChunkBytes);
    DUET_CUDA_CHECK(cudaMallocHost(&c.data, c.bytes));
    DUET_CUDA_CHECK(cudaEventCreateWithFlags(&c.copied, cudaEventDisableTiming));
    chunks_.push_back(c);
    return chunks_.back();
}

void PinnedStaging::upload(void* device, const void* host, size_t bytes) {
    if (bytes == 0) return;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    DUET_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
    if (bytes > kLargest || capture != cudaStreamCaptureStatusNone) {
        DUET_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
        return;
    }
    Chunk& c = free_chunk(bytes);
    std::memcpy(c.data, host, bytes);
    DUET_CUDA_CHECK(cudaMemcpyAsync(device, c.data, bytes, cudaMemcpyHostToDevice, stream_));
    DUET_CUDA_CHECK(cudaEventRecord(c.copied, stream_));
}

}  // namespace duet
