#include "models/forward_support.h"

#include "base/error.h"

namespace duet {

void require_forward_fits(std::span<const int32_t> ids, int64_t vocab, const SequenceState& state) {
    const int64_t n = static_cast<int64_t>(ids.size());
    require(n > 0, "forward: no tokens given");
    for (size_t t = 0; t < ids.size(); ++t) {
        require(ids[t] >= 0 && ids[t] < vocab, "token id ", ids[t], " at position ", t,
                " is outside the vocabulary [0, ", vocab, ")");
    }
    require(n <= state.room(), "a prompt of ", n, " tokens does not fit the state: capacity ", state.capacity(),
            " tokens, ", state.position(), " already used");
}

void HiddenReporter::operator()(int64_t index, const float* rows) {
    if (!hook_) return;
    host_.resize(static_cast<size_t>(n_ * hidden_));
    backend_.download(host_.data(), rows, host_.size());
    hook_(index, host_.data(), n_);
}

std::vector<float> lm_head_logits(Backend& backend, const MatrixView& head, const float* normed, int64_t n,
                                  int64_t rows) {
    Buffer logits = backend.alloc(static_cast<size_t>(rows * head.rows));
    backend.matmul(head, normed + (n - rows) * head.cols, rows, logits.data());
    std::vector<float> result(logits.size());
    backend.download(result.data(), logits.data(), result.size());
    return result;
}

}  // namespace duet
