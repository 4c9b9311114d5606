// Decode steps recorded as CUDA graphs and replayed. A step's ops are first run plainly (so weights
// are copied and scratch has its final size), then recorded once on the backend's stream, then the
// recording is replayed for every later step with the same key: one launch instead of hundreds, and
// no host work between the kernels. Buffers allocated while recording are kept by the recording.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/buffer.h"

namespace duet {

class StepGraphs {
public:
    // `enabled` false: every step runs its ops plainly.
    StepGraphs(cudaStream_t stream, bool enabled) : stream_(stream), enabled_(enabled) {}
    ~StepGraphs();
    StepGraphs(const StepGraphs&) = delete;
    StepGraphs& operator=(const StepGraphs&) = delete;

    const float* run(const std::shared_ptr<const void>& key, const std::function<const float*()>& issue);

    bool recording() const { return recording_ != nullptr; }
    // An allocation made while recording: the recording keeps it.
    void keep(const Buffer& buffer);
    // The recording under way cannot be used (memory it reads had to be replaced while recording).
    void spoil() { spoiled_ = true; }
    // Device memory some recordings use was replaced: they are recorded again.
    void forget_all();

private:
    struct Recording {
        std::weak_ptr<const void> key;
        int plain_runs = 0;
        bool unusable = false;  // recording failed: the step always runs plainly
        cudaGraphExec_t exec = nullptr;
        const float* result = nullptr;
        std::vector<Buffer> kept;
    };
    static void release(Recording& r);
    void drop_expired();
    const float* record(Recording& r, const std::function<const float*()>& issue);

    cudaStream_t stream_;
    bool enabled_;
    Recording* recording_ = nullptr;
    bool spoiled_ = false;
    std::unordered_map<const void*, Recording> recordings_;
};

}  // namespace duet
