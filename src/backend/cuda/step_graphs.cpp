#include "backend/cuda/step_graphs.h"

#include <cstdio>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace duet {

namespace {

// Plain runs, with every part run, before a step is recorded: the first copies weights and sizes
// scratch. A two-part step's run that skipped the second part does not count: that part's
// weights would still be on the host, and its scratch unsized.
constexpr int kPlainRunsBeforeRecording = 1;

// Relaxed: an allocation while recording is allowed (the recording keeps the block).
constexpr cudaStreamCaptureMode kCaptureMode = cudaStreamCaptureModeRelaxed;

std::string cuda_failure(const char* call, cudaError_t status) {
    return str_cat(call, ": ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
}

}  // namespace

StepGraphs::~StepGraphs() {
    for (auto& [key, r] : recordings_) release(r);
}

void StepGraphs::release(Recording& r) {
    if (r.exec != nullptr) cudaGraphExecDestroy(r.exec);
    r.exec = nullptr;
    r.result = nullptr;
    r.first_result = nullptr;
    r.kept.clear();
}

void StepGraphs::keep(const Buffer& buffer) {
    if (recording_ != nullptr) recording_->kept.push_back(buffer);
}

void StepGraphs::forget_all() {
    for (auto& [key, r] : recordings_) {
        release(r);
        // Weights and scratch are in place: record at once (a two-part step whose second part has
        // not run yet still waits for a plain run of it).
        if (r.ran_fully) r.plain_runs = kPlainRunsBeforeRecording;
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

StepGraphs::Recording& StepGraphs::recording_for(const std::shared_ptr<const void>& key) {
    Recording& r = recordings_[key.get()];
    if (r.key.lock() != key) {  // a new key (or a dead one's address reused)
        release(r);
        r = Recording{};
        r.key = key;
    }
    return r;
}

const float* StepGraphs::run(const std::shared_ptr<const void>& key, const Issue& issue) {
    return run_parts(key, Parts{issue});
}

const float* StepGraphs::run_then_if(const std::shared_ptr<const void>& key, const Issue& first,
                                     const int32_t* go_on, const Issue& second) {
    return run_parts(key, Parts{first, go_on, &second});
}

const float* StepGraphs::run_parts(const std::shared_ptr<const void>& key, const Parts& parts) {
    if (!enabled_) return run_plainly(parts).result;
    if (recording_ != nullptr) {
        // Inside another step's recording the ops become part of it; a flag cannot be read there.
        require(!parts.two(), "a two-part decode step was run inside the recording of another step, expected "
                              "it on its own");
        return parts.first();
    }
    drop_expired();
    Recording& r = recording_for(key);
    if (r.exec != nullptr) return replay(r);
    if (r.unusable || r.plain_runs < kPlainRunsBeforeRecording) {
        const PlainRun run = run_plainly(parts);
        if (run.every_part_ran) {
            ++r.plain_runs;
            r.ran_fully = true;
        }
        return run.result;
    }
    return record(r, parts);
}

StepGraphs::PlainRun StepGraphs::run_plainly(const Parts& parts) {
    PlainRun run{parts.first(), true};
    if (!parts.two()) return run;
    if (read_flag(parts.go_on)) {
        run.result = (*parts.second)();
    } else {
        run.every_part_ran = false;
    }
    return run;
}

bool StepGraphs::read_flag(const int32_t* flag) {
    int32_t value = 0;
    DUET_CUDA_CHECK(cudaMemcpyAsync(&value, flag, sizeof(value), cudaMemcpyDeviceToHost, stream_));
    DUET_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return value != 0;
}

const float* StepGraphs::replay(const Recording& r) {
    DUET_CUDA_CHECK(cudaGraphLaunch(r.exec, stream_));
    if (r.first_result == r.result) return r.result;
    return read_flag(r.go_on) ? r.result : r.first_result;  // which part ended the step
}

const float* StepGraphs::record(Recording& r, const Parts& parts) {
    DUET_CUDA_CHECK(cudaStreamBeginCapture(stream_, kCaptureMode));
    recording_ = &r;
    spoiled_ = false;
    Capture c = capture(parts);
    recording_ = nullptr;
    cudaGetLastError();  // a failed recording leaves its error behind
    cudaGraphExec_t exec = nullptr;
    bool usable = c.issued && !spoiled_ && c.graph != nullptr;
    if (usable) {
        const cudaError_t instantiated = cudaGraphInstantiate(&exec, c.graph, 0);
        if (instantiated != cudaSuccess) {
            usable = false;
            c.why = cuda_failure("cudaGraphInstantiate", instantiated);
        }
    }
    if (c.graph != nullptr) cudaGraphDestroy(c.graph);  // the conditional node's body with it
    if (!usable) {
        cudaGetLastError();
        r.kept.clear();
        if (spoiled_ && c.issued) {
            r.plain_runs = 0;  // scratch grew: record again after a plain run at the new size
        } else {
            r.unusable = true;
            report_failure(c.why);
        }
        return run_plainly(parts).result;  // nothing recorded ran: run the step now
    }
    r.exec = exec;
    r.result = c.result;
    r.first_result = c.first_result;
    r.go_on = parts.go_on;
    return replay(r);
}

// Records the parts on the stream, whose capture has begun: the first part into the outer graph,
// ended by a conditional node, then (with the outer capture ended) the second part into that
// node's body.
StepGraphs::Capture StepGraphs::capture(const Parts& parts) {
    Capture c;
    cudaGraph_t body = nullptr;
    try {
        c.first_result = parts.first();
        if (parts.two()) body = end_with_if_node(parts.go_on);
    } catch (const std::exception& e) {
        c.issued = false;  // e.g. an op that cannot be recorded: the step runs plainly
        c.why = e.what();
    }
    c.result = c.first_result;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &c.graph);
    if (ended != cudaSuccess && c.issued) {
        c.issued = false;
        c.why = cuda_failure("cudaStreamEndCapture", ended);
    }
    if (c.issued && parts.two()) capture_body(body, *parts.second, c);
    return c;
}

// Adds, at the end of the first part's capture, a kernel that sets a condition from *go_on and
// the conditional node it steers; the capture goes on behind the node. Returns the node's body.
cudaGraph_t StepGraphs::end_with_if_node(const int32_t* go_on) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    DUET_CUDA_CHECK(cudaStreamGetCaptureInfo(stream_, &status, nullptr, &graph, nullptr, nullptr, nullptr));
    require(status == cudaStreamCaptureStatusActive, "the first part of a decode step ended its recording (status ",
            static_cast<int>(status), "), expected it still active");
    cudaGraphConditionalHandle condition{};
    // Reset to 0 at every launch, so a condition is never left over from the launch before.
    DUET_CUDA_CHECK(cudaGraphConditionalHandleCreate(&condition, graph, 0, cudaGraphCondAssignDefault));
    cuda::set_condition(condition, go_on, stream_);

    const cudaGraphNode_t* after = nullptr;
    const cudaGraphEdgeData* after_edges = nullptr;
    size_t count = 0;
    DUET_CUDA_CHECK(cudaStreamGetCaptureInfo(stream_, &status, nullptr, &graph, &after, &after_edges, &count));
    // Full dependencies into the node: a programmatic edge may only join two kernels. The kernel
    // before it is launched plainly, so these are the edges the capture would have made.
    const std::vector<cudaGraphEdgeData> full(count, cudaGraphEdgeData{});
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = condition;
    params.conditional.type = cudaGraphCondTypeIf;
    params.conditional.size = 1;
    cudaGraphNode_t node = nullptr;
    DUET_CUDA_CHECK(cudaGraphAddNode(&node, graph, after, full.data(), count, &params));
    DUET_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(stream_, &node, nullptr, 1, cudaStreamSetCaptureDependencies));
    require(params.conditional.phGraph_out != nullptr && params.conditional.phGraph_out[0] != nullptr,
            "cudaGraphAddNode made a conditional node without the body graph it was expected to return");
    return params.conditional.phGraph_out[0];
}

// Records `second` into `body` (owned by its conditional node); its first kernels depend on
// nothing inside the body, so no programmatic edge crosses into the node.
void StepGraphs::capture_body(cudaGraph_t body, const Issue& second, Capture& c) {
    const cudaError_t begun = cudaStreamBeginCaptureToGraph(stream_, body, nullptr, nullptr, 0, kCaptureMode);
    if (begun != cudaSuccess) {
        c.issued = false;
        c.why = cuda_failure("cudaStreamBeginCaptureToGraph", begun);
        return;
    }
    try {
        c.result = second();
    } catch (const std::exception& e) {
        c.issued = false;
        c.why = e.what();
    }
    cudaGraph_t captured = nullptr;  // `body` again, still owned by the node
    const cudaError_t ended = cudaStreamEndCapture(stream_, &captured);
    if (ended != cudaSuccess && c.issued) {
        c.issued = false;
        c.why = cuda_failure("cudaStreamEndCapture (the second part)", ended);
    }
}

// Once per backend: a step that cannot be recorded is slow, not wrong, so it is said, not thrown.
void StepGraphs::report_failure(const std::string& why) {
    if (failure_reported_) return;
    failure_reported_ = true;
    std::fprintf(stderr, "duet: a decode step could not be recorded as a CUDA graph, it runs op by op: %s\n",
                 why.c_str());
}

}  // namespace duet
