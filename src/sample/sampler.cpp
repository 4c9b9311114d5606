#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/error.h"
#include "sample/greedy.h"

namespace duet {

namespace {

// The kept candidates, most likely first, with their weights at the sampling temperature.
struct Kept {
    std::vector<int32_t> index;
    std::vector<double> weight;
    double total = 0.0;
};

Kept keep_candidates(std::span<const float> logits, const SamplingParams& p) {
    require(!logits.empty(), "sampling: no logits");
    require(p.temperature > 0.0f && std::isfinite(p.temperature), "sampling: temperature ", p.temperature,
            " must be positive (0 means argmax)");
    require(p.top_p > 0.0f && p.top_p <= 1.0f, "sampling: top_p ", p.top_p, " must be in (0, 1]");
    require(p.top_k >= 0, "sampling: top_k ", p.top_k, " must not be negative");
    const int64_t n = static_cast<int64_t>(logits.size());
    const int64_t k = p.top_k == 0 ? n : std::min(p.top_k, n);
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return ranks_before(logits.data(), a, b); });
    order.resize(static_cast<size_t>(k));

    // top-p on the untempered softmax of the top-k: the smallest prefix whose mass reaches p.
    const double top = logits[order[0]];
    std::vector<double> plain(order.size());
    for (size_t i = 0; i < order.size(); ++i) plain[i] = std::exp(double(logits[order[i]]) - top);
    const double plain_total = std::accumulate(plain.begin(), plain.end(), 0.0);
    size_t kept = 0;
    for (double mass = 0.0; kept < order.size();) {
        mass += plain[kept++] / plain_total;
        if (mass >= p.top_p) break;
    }
    order.resize(kept);

    Kept out;
    out.index = std::move(order);
    for (const int32_t i : out.index) {
        out.weight.push_back(std::exp((double(logits[i]) - top) / p.temperature));
        out.total += out.weight.back();
    }
    return out;
}

}  // namespace

int32_t sample_index(std::span<const float> logits, const SamplingParams& p, float uniform) {
    if (p.temperature == 0.0f) return argmax(logits.data(), static_cast<int64_t>(logits.size()));
    const Kept kept = keep_candidates(logits, p);
    const double target = double(uniform) * kept.total;
    double mass = 0.0;
    for (size_t i = 0; i < kept.index.size(); ++i) {
        mass += kept.weight[i];
        if (target < mass) return kept.index[i];
    }
    return kept.index.back();  // uniform within rounding of 1
}

void sampling_distribution(std::span<const float> logits, const SamplingParams& p, std::span<double> out) {
    std::fill(out.begin(), out.end(), 0.0);
    if (p.temperature == 0.0f) {
        out[argmax(logits.data(), static_cast<int64_t>(logits.size()))] = 1.0;
        return;
    }
    const Kept kept = keep_candidates(logits, p);
    for (size_t i = 0; i < kept.index.size(); ++i) out[kept.index[i]] = kept.weight[i] / kept.total;
}

bool ras_should_redraw(std::span<const int32_t> recent, int32_t token, const RasParams& ras) {
    const size_t window = std::min(recent.size(), static_cast<size_t>(ras.window));
    const auto begin = recent.end() - static_cast<std::ptrdiff_t>(window);
    return std::count(begin, recent.end(), token) >= ras.min_repeats;
}

int32_t sample_with_ras(std::span<const float> logits, const SamplingParams& params, const RasParams& ras,
                        std::span<const int32_t> recent, float first, float second, int32_t exempt) {
    const int32_t choice = sample_index(logits, params, first);
    if (params.temperature == 0.0f || choice == exempt || !ras_should_redraw(recent, choice, ras)) return choice;
    return sample_index(logits, SamplingParams{1.0f, 0, 1.0f, params.seed}, second);
}

}  // namespace duet
