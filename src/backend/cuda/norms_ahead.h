// The residual streams' norms prepared ahead inside a decode step (Backend::norm_ahead): which stream
// the model says is read normalised next, which op prepared it, and the device memory the
// preparations go to (cuda::NormAhead, kernels/cuda/norm_ahead.h).
//
// A preparation is used only by the op issued right after the one that wrote it, and only when that
// op reads the same stream, as wide, with the same norm weights; so whatever else a model does
// between the two, a reader never takes a stale one. Each preparation of a step has its own place;
// the partial sums of the places are zeroed when the step begins, as an op of the step (recorded
// with it): as many places as the most any step has asked for so far (all of them the first time),
// and a step that asks for more than were zeroed goes without for the rest.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/norm_ahead.h"

namespace duet {

class NormsAhead {
public:
    // A decode step begins on `stream`: hints and preparations from before are dropped.
    void begin_step(cudaStream_t stream);
    // The step has been issued: hints outside steps are ignored.
    void end_step();

    // Inside a step, the next op that writes or adds to stream `x` is to prepare rmsnorm(x) with
    // `weight` (the host pointer the reader will name).
    void expect(const float* x, const float* weight);
    // The host weights of the norm expected for `out` when an op is about to write or add to it;
    // null when none is. The expectation is used up either way.
    const float* expected_for(const float* out);
    // Where op number `op`, which writes `out` (`cols` values), puts its preparation, the norm's
    // weights being `device_weight`; off when the step has no room for it. The op's reader is op + 1.
    cuda::NormAhead start(const float* out, int64_t cols, const float* host_weight, const float* device_weight,
                          uint64_t op);

    // For op number `op`, reading rmsnorm(x) of `cols` values with `weight` (host pointer): the
    // preparation when op - 1 wrote one for exactly that, else off.
    cuda::NormAhead for_reader(const float* x, int64_t cols, const float* weight, uint64_t op) const;

private:
    static constexpr int64_t kPlaces = 256;        // preparations a step, at most
    static constexpr int64_t kWidestStream = 8192;  // values a stream

    struct Prepared {
        const float* x = nullptr;
        const float* host_weight = nullptr;
        int64_t cols = 0;
        uint64_t op = 0;
        cuda::NormAhead ahead;
    };

    double* sums(int64_t place);
    float* weighted(int64_t place);

    cuda::DeviceBuffer memory_;  // every place's partial sums, then [kPlaces][kWidestStream] floats
    bool in_step_ = false;
    int64_t places_used_ = 0;    // this step's
    int64_t places_zeroed_ = 0;  // for this step
    int64_t places_wanted_ = -1;  // the most any step has asked for (-1: no step yet)
    const float* expected_x_ = nullptr;
    const float* expected_weight_ = nullptr;
    Prepared prepared_;
};

}  // namespace duet
