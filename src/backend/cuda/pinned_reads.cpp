#include "backend/cuda/pinned_reads.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_check.h"

namespace duet {

namespace {

constexpr size_t kLeastBytes = size_t(4) << 10;

}  // namespace

PinnedReads::~PinnedReads() {
    if (copied_ != nullptr) {
        cudaEventSynchronize(copied_);
        cudaEventDestroy(copied_);
    }
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
}

// Room for `bytes` more. Growing waits for the copies still queued into the old buffer first.
void PinnedReads::reserve(size_t bytes) {
    if (used_ + bytes <= capacity_) return;
    const size_t capacity = std::max({kLeastBytes, 2 * capacity_, used_ + bytes});
    void* memory = nullptr;
    DUET_CUDA_CHECK(cudaMallocHost(&memory, capacity));
    auto* grown = static_cast<uint8_t*>(memory);
    if (pinned_ != nullptr) {
        if (!pending_.empty()) DUET_CUDA_CHECK(cudaEventSynchronize(copied_));
        std::memcpy(grown, pinned_, used_);
        DUET_CUDA_CHECK(cudaFreeHost(pinned_));
    }
    pinned_ = grown;
    capacity_ = capacity;
}

void PinnedReads::read_later(void* host, const void* device, size_t bytes) {
    if (bytes == 0) return;
    if (copied_ == nullptr) DUET_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
    reserve(bytes);
    DUET_CUDA_CHECK(cudaMemcpyAsync(pinned_ + used_, device, bytes, cudaMemcpyDeviceToHost, stream_));
    DUET_CUDA_CHECK(cudaEventRecord(copied_, stream_));
    pending_.push_back(Pending{host, used_, bytes});
    used_ += bytes;
}

void PinnedReads::await() {
    if (pending_.empty()) return;
    DUET_CUDA_CHECK(cudaEventSynchronize(copied_));
    for (const Pending& p : pending_) std::memcpy(p.host, pinned_ + p.offset, p.bytes);
    pending_.clear();
    used_ = 0;
}

}  // namespace duet
