// Backend::mark on the GPU: with DUET_CUDA_MARKS=1 each layer's mark inside a decode step (with
// DUET_CUDA_MARKS=ops each op's too) becomes a one-thread kernel that stores the device clock once
// the ops before it have finished, so the spans between marks are measured inside the recorded step
// as it replays, early launches and all. Each mark adds a kernel boundary (about 1-2 µs), so the
// spans are a little longer than without marks. When the backend goes away, the spans of the last
// step run are printed, summed by label. With DUET_CUDA_MARKS=prefill the ops' marks outside the
// decode steps are timed instead (prompts; the op before a prompt's first mark is not): from the
// first mark after the last decode step, so the prompts run between two steps are summed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/device_buffer.h"

namespace duet {

class StepMarks {
public:
    explicit StepMarks(cudaStream_t stream);
    bool enabled() const { return enabled_; }
    // A step's ops are being issued (run plainly or recorded): its marks start again at the first slot.
    void begin_step();
    // Outside begin_step .. end_step marks are ignored (prefill, for one); an op's mark is ignored
    // unless ops are marked. In the prefill mode it is the other way round.
    void mark(std::string_view label, bool op = false);
    void end_step();
    // Prints the spans of the last step that ran (the stream must be idle).
    void report() const;

private:
    static constexpr size_t kMaxMarks = 4096;
    cudaStream_t stream_;
    bool enabled_;
    bool ops_ = false;
    bool prefill_ = false;   // the marks outside steps are the ones timed
    bool in_step_ = false;   // a step is being issued
    bool timing_ = false;    // marks are being recorded: in a step, or (prefill mode) since the first
                             // mark after the last step
    std::vector<std::string> labels_;  // labels_[i] names the span that ends at slot i + 1
    cuda::DeviceBuffer slots_;
};

}  // namespace duet
