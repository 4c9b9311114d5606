#include "backend/cuda/step_marks.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace duet {

StepMarks::StepMarks(cudaStream_t stream) : stream_(stream) {
    const char* on = std::getenv("DUET_CUDA_MARKS");
    enabled_ = on != nullptr && std::strcmp(on, "0") != 0;
    prefill_ = enabled_ && std::strcmp(on, "prefill") == 0;
    ops_ = enabled_ && (std::strcmp(on, "ops") == 0 || prefill_);
    if (enabled_) slots_ = cuda::DeviceBuffer(kMaxMarks * sizeof(uint64_t));
}

void StepMarks::begin_step() {
    if (!enabled_) return;
    in_step_ = true;
    timing_ = !prefill_;
    if (prefill_) return;  // the next mark outside a step starts the timing again
    labels_.clear();
    cuda::record_time(slots_.as<uint64_t>(), stream_);
}

void StepMarks::mark(std::string_view label, bool op) {
    if (!enabled_) return;
    if (prefill_ && !in_step_ && !timing_) {  // the first mark after a step starts the timing again
        timing_ = true;
        labels_.clear();
        cuda::record_time(slots_.as<uint64_t>(), stream_);
    }
    if (!timing_ || (op && !ops_) || labels_.size() + 1 >= kMaxMarks) return;
    labels_.emplace_back(label);
    cuda::record_time(slots_.as<uint64_t>() + labels_.size(), stream_);
}

void StepMarks::end_step() {
    if (!in_step_) return;
    if (!prefill_) mark("rest of the step");
    in_step_ = timing_ = false;
}

void StepMarks::report() const {
    if (!enabled_ || labels_.empty()) return;
    const std::vector<uint64_t> t = slots_.download<uint64_t>(labels_.size() + 1);
    struct Sum {
        std::string label;
        double us = 0.0;
        int count = 0;
    };
    std::vector<Sum> sums;  // in the order the labels first came
    for (size_t i = 0; i < labels_.size(); ++i) {
        size_t k = 0;
        while (k < sums.size() && sums[k].label != labels_[i]) ++k;
        if (k == sums.size()) sums.push_back(Sum{labels_[i]});
        sums[k].us += static_cast<double>(t[i + 1] - t[i]) * 1e-3;
        ++sums[k].count;
    }
    std::fprintf(stderr, "%-22s %6s %10s %10s\n", prefill_ ? "span of the prefill" : "span of the last step", "count",
                 "us", "us each");
    for (const Sum& s : sums) {
        std::fprintf(stderr, "%-22s %6d %10.1f %10.2f\n", s.label.c_str(), s.count, s.us, s.us / s.count);
    }
    std::fprintf(stderr, "%-22s %6zu %10.1f\n", "all", labels_.size(), static_cast<double>(t.back() - t[0]) * 1e-3);
}

}  // namespace duet
