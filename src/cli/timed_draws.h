// The timing loop of a speech benchmark, kept apart so that its bound can be tested without a model.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "cli/bench_support.h"

namespace duet::cli {

// Calls `draw` (true when it fed a frame to the model, false when it drew the end of the speech, which
// feeds none) until `frames` frames are fed, and returns each call's seconds. A model whose draws
// keep ending the speech (non-finite logits, say) would never get there: after `max_draws` calls it
// is an error naming `what`.
template <typename Draw>
std::vector<double> time_draws_until_fed(int64_t frames, int64_t max_draws, Draw&& draw, std::string_view what) {
    std::vector<double> seconds;
    int64_t fed = 0;
    while (fed < frames) {
        require(static_cast<int64_t>(seconds.size()) < max_draws, what, ": ", seconds.size(), " draws fed only ", fed,
                " of ", frames,
                " frames (the others drew the end of the speech); these weights give no speech to time");
        const auto start = Clock::now();
        fed += draw() ? 1 : 0;
        seconds.push_back(seconds_since(start));
    }
    return seconds;
}

}  // namespace duet::cli
