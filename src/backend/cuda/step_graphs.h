// Decode steps recorded as CUDA graphs and replayed. A step's ops are first run plainly (so weights
// are copied and scratch has its final size), then recorded once on the backend's stream, then the
// recording is replayed for every later step with the same key: one launch instead of hundreds, and
// no host work between the kernels. Buffers allocated while recording are kept by the recording.
// A step in two parts (Backend::run_step_then_if) is recorded as one graph: the first part, then a
// conditional node whose body, the second part, runs when the first part's flag is non-zero.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/buffer.h"

namespace duet {

class StepGraphs {
public:
    using Issue = std::function<const float*()>;

    // `enabled` false: every step runs its ops plainly.
    StepGraphs(cudaStream_t stream, bool enabled) : stream_(stream), enabled_(enabled) {}
    ~StepGraphs();
    StepGraphs(const StepGraphs&) = delete;
    StepGraphs& operator=(const StepGraphs&) = delete;

    const float* run(const std::shared_ptr<const void>& key, const Issue& issue);
    // Backend::run_step_then_if.
    const float* run_then_if(const std::shared_ptr<const void>& key, const Issue& first, const int32_t* go_on,
                             const Issue& second);

    bool recording() const { return recording_ != nullptr; }
    // An allocation made while recording: the recording keeps it.
    void keep(const Buffer& buffer);
    // The recording under way cannot be used (memory it reads had to be replaced while recording).
    void spoil() { spoiled_ = true; }
    // Device memory some recordings use was replaced: they are recorded again.
    void forget_all();

private:
    // What a step issues: `first`, and for a two-part step `second`, run when *go_on != 0.
    struct Parts {
        const Issue& first;
        const int32_t* go_on = nullptr;
        const Issue* second = nullptr;
        bool two() const { return second != nullptr; }
    };
    struct Recording {
        std::weak_ptr<const void> key;
        int plain_runs = 0;     // plain runs in which every part ran
        bool ran_fully = false;  // every part has run at least once: its weights are on the device
        bool unusable = false;  // recording failed: the step always runs plainly
        cudaGraphExec_t exec = nullptr;
        const float* result = nullptr;          // what the step returned (with its second part, if any)
        const float* first_result = nullptr;    // a two-part step's result when the second part is skipped
        const int32_t* go_on = nullptr;         // a two-part step's flag
        std::vector<Buffer> kept;
    };
    // What a plain run returned, and whether every part ran.
    struct PlainRun {
        const float* result = nullptr;
        bool every_part_ran = true;
    };
    // What a recording captured: the graph (owned) and the results, or why it failed.
    struct Capture {
        cudaGraph_t graph = nullptr;
        const float* result = nullptr;
        const float* first_result = nullptr;
        bool issued = true;  // false: an op or a recording call failed
        std::string why;     // what failed
    };

    static void release(Recording& r);
    void drop_expired();
    Recording& recording_for(const std::shared_ptr<const void>& key);
    const float* run_parts(const std::shared_ptr<const void>& key, const Parts& parts);
    PlainRun run_plainly(const Parts& parts);
    bool read_flag(const int32_t* flag);
    const float* replay(const Recording& r);
    const float* record(Recording& r, const Parts& parts);
    Capture capture(const Parts& parts);
    cudaGraph_t end_with_if_node(const int32_t* go_on);
    void capture_body(cudaGraph_t body, const Issue& second, Capture& c);
    void report_failure(const std::string& why);

    cudaStream_t stream_;
    bool enabled_;
    Recording* recording_ = nullptr;
    bool spoiled_ = false;
    bool failure_reported_ = false;
    std::unordered_map<const void*, Recording> recordings_;
};

}  // namespace duet
