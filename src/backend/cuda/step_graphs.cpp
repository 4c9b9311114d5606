#include "backend/cuda/step_graphs.h"

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"

namespace duet {

namespace {

// Plain runs before a step is recorded: the first copies weights and sizes scratch.
constexpr int kPlainRunsBeforeRecording = 1;

}  // namespace

StepGraphs::~StepGraphs() {
    for (auto& [key, r] : recordings_) release(r);
}

void StepGraphs::release(Recording& r) {
    if (r.exec != nullptr) cudaGraphExecDestroy(r.exec);
    r.exec = nullptr;
    r.result = nullptr;
    r.kept.clear();
}

void StepGraphs::keep(const Buffer& buffer) {
    if (recording_ != nullptr) recording_->kept.push_back(buffer);
}

void StepGraphs::forget_all() {
    for (auto& [key, r] : recordings_) {
        release(r);
        r.plain_runs = kPlainRunsBeforeRecording;  // weights and scratch are in place: record at once
    }
}

void StepGraphs::drop_expired() {
    for (auto it = recordings_.begin(); it != recordings_.end();) {
        if (it->second.key.expired()) {
            release(it->second);
            it = recordings_.erase(it);
        } else {
            ++it;
        }
    }
}

const float* StepGraphs::run(const std::shared_ptr<const void>& key, const std::function<const float*()>& issue) {
    if (!enabled_ || recording_ != nullptr) return issue();
    drop_expired();
    Recording& r = recordings_[key.get()];
    if (r.key.lock() != key) {  // a new key (or a dead one's address reused)
        release(r);
        r = Recording{};
        r.key = key;
    }
    if (r.exec != nullptr) {
        DUET_CUDA_CHECK(cudaGraphLaunch(r.exec, stream_));
        return r.result;
    }
    if (r.unusable || r.plain_runs < kPlainRunsBeforeRecording) {
        ++r.plain_runs;
        return issue();
    }
    return record(r, issue);
}

const float* StepGraphs::record(Recording& r, const std::function<const float*()>& issue) {
    // Relaxed: an allocation while recording is allowed (the recording keeps the block).
    DUET_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    recording_ = &r;
    spoiled_ = false;
    const float* result = nullptr;
    bool issued = true;
    try {
        result = issue();
    } catch (const std::exception&) {
        issued = false;  // e.g. an op that cannot be recorded: the step runs plainly below
    }
    recording_ = nullptr;
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    cudaGetLastError();  // a failed recording leaves its error behind
    cudaGraphExec_t exec = nullptr;
    const bool usable = issued && !spoiled_ && ended == cudaSuccess && graph != nullptr &&
                        cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!usable) {
        cudaGetLastError();
        r.kept.clear();
        if (spoiled_ && issued) {
            r.plain_runs = 0;  // scratch grew: record again after a plain run at the new size
        } else {
            r.unusable = true;
        }
        return issue();  // nothing recorded ran: run the step now
    }
    r.exec = exec;
    r.result = result;
    DUET_CUDA_CHECK(cudaGraphLaunch(r.exec, stream_));
    return result;
}

}  // namespace duet
