// Sampling: the kept set and its renormalised distribution (checked by chi-square over many
// draws), temperature, RAS's rule, and the counter-based generator's reproducibility.
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "sample/philox.h"
#include "sample/sampler.h"
#include "test_support.h"

namespace duet {
namespace {

const std::vector<float> kLogits = {2.0f, 1.5f, -0.5f, 3.0f, 0.25f, 1.0f, -2.0f, 2.5f, 0.0f, 1.25f};

// The distribution the rules define, computed directly from them in double.
std::vector<double> reference_distribution(const std::vector<float>& logits, double temperature, size_t top_k,
                                           double top_p) {
    std::vector<size_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
    order.resize(std::min(top_k, order.size()));
    double total = 0.0;
    for (size_t i : order) total += std::exp(double(logits[i]));
    std::vector<size_t> kept;
    double mass = 0.0;
    for (size_t i : order) {
        kept.push_back(i);
        mass += std::exp(double(logits[i])) / total;
        if (mass >= top_p) break;
    }
    std::vector<double> p(logits.size(), 0.0);
    double z = 0.0;
    for (size_t i : kept) z += std::exp(double(logits[i]) / temperature);
    for (size_t i : kept) p[i] = std::exp(double(logits[i]) / temperature) / z;
    return p;
}

// Pearson's statistic of `draws` draws against p, over the cells p gives mass; draws outside fail.
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int draws) {
    double stat = 0.0;
    for (size_t i = 0; i < p.size(); ++i) {
        if (p[i] == 0.0) {
            EXPECT_EQ(counts[i], 0) << "index " << i << " is outside the kept set";
            continue;
        }
        const double expected = p[i] * draws;
        stat += (counts[i] - expected) * (counts[i] - expected) / expected;
    }
    return stat;
}

TEST(Sampler, DistributionMatchesTheRules) {
    struct Case {
        float temperature;
        int64_t top_k;
        float top_p;
    };
    for (const Case c : {Case{1.0f, 0, 1.0f}, Case{1.0f, 4, 1.0f}, Case{1.0f, 0, 0.7f}, Case{0.5f, 5, 0.9f},
                         Case{2.0f, 3, 0.95f}, Case{0.8f, 30, 0.9f}}) {
        SamplingParams params{c.temperature, c.top_k, c.top_p, 0};
        std::vector<double> got(kLogits.size());
        sampling_distribution(kLogits, params, got);
        const std::vector<double> want =
            reference_distribution(kLogits, c.temperature, c.top_k == 0 ? kLogits.size() : size_t(c.top_k), c.top_p);
        for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "index " << i;
    }
}

TEST(Sampler, DrawFrequenciesPassChiSquare) {
    // Critical values of chi-square at p = 0.001 for 1..9 degrees of freedom.
    const double critical[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};
    const int draws = 40000;
    for (const SamplingParams params : {SamplingParams{1.0f, 0, 1.0f, 11}, SamplingParams{0.7f, 5, 0.9f, 12},
                                        SamplingParams{1.5f, 4, 0.8f, 13}}) {
        std::vector<double> p(kLogits.size());
        sampling_distribution(kLogits, params, p);
        std::vector<int> counts(kLogits.size(), 0);
        for (int step = 0; step < draws; ++step) {
            ++counts[sample_index(kLogits, params, uniform_draw(params.seed, step, 0))];
        }
        const int cells = static_cast<int>(std::count_if(p.begin(), p.end(), [](double v) { return v > 0.0; }));
        ASSERT_GE(cells, 2);
        EXPECT_LT(chi_square(counts, p, draws), critical[cells - 1]) << "temperature " << params.temperature;
    }
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
    std::vector<double> cold(kLogits.size()), warm(kLogits.size()), hot(kLogits.size());
    sampling_distribution(kLogits, {0.25f, 0, 1.0f, 0}, cold);
    sampling_distribution(kLogits, {1.0f, 0, 1.0f, 0}, warm);
    sampling_distribution(kLogits, {4.0f, 0, 1.0f, 0}, hot);
    EXPECT_GT(cold[3], warm[3]);
    EXPECT_GT(warm[3], hot[3]);
    // p ∝ exp(l / T): the odds of two choices are exp((l_a − l_b) / T).
    EXPECT_NEAR(cold[3] / cold[0], std::exp((3.0 - 2.0) / 0.25), 1e-9);
    EXPECT_NEAR(hot[3] / hot[0], std::exp((3.0 - 2.0) / 4.0), 1e-9);
}

TEST(Sampler, TemperatureZeroIsArgmaxWithTheFirstOnTies) {
    EXPECT_EQ(sample_index(kLogits, {0.0f, 30, 0.9f, 0}, 0.999f), 3);
    const std::vector<float> tied = {1.0f, 5.0f, 5.0f};
    EXPECT_EQ(sample_index(tied, {0.0f, 0, 1.0f, 0}, 0.5f), 1);
}

// A NaN ranks above every number, of either sign, the first of several winning (torch.argmax's
// rule): the order stays total, so the draws are defined whatever the logits hold. With a NaN among
// the kept candidates their weights are NaN too, and the draw falls to the last kept one.
TEST(Sampler, NanLogitsRankAboveEveryNumber) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> logits = {1.0f, inf, -nan, 3.0f, nan, -inf};
    EXPECT_EQ(sample_index(logits, {0.0f, 0, 1.0f, 0}, 0.5f), 2);
    EXPECT_EQ(sample_index(logits, {1.0f, 1, 1.0f, 0}, 0.5f), 2);
    EXPECT_EQ(sample_index(logits, {1.0f, 2, 1.0f, 0}, 0.5f), 4);
    EXPECT_EQ(sample_index(logits, {1.0f, 0, 0.9f, 0}, 0.1f), 5);
    const std::vector<float> numbers_first = {2.0f, 7.0f, nan};
    EXPECT_EQ(sample_index(numbers_first, {0.0f, 0, 1.0f, 0}, 0.5f), 2);
}

TEST(Sampler, BadParametersAreRefused) {
    EXPECT_THROW(sample_index(kLogits, {-1.0f, 0, 1.0f, 0}, 0.5f), Error);
    EXPECT_THROW(sample_index(kLogits, {1.0f, 0, 0.0f, 0}, 0.5f), Error);
    EXPECT_THROW(sample_index(kLogits, {1.0f, -3, 1.0f, 0}, 0.5f), Error);
}

TEST(Ras, RedrawsExactlyWhenTheWindowHoldsTheChoiceTwice) {
    const RasParams ras;  // window 16, two repeats
    std::vector<int32_t> recent = {7, 1, 2, 7};
    EXPECT_TRUE(ras_should_redraw(recent, 7, ras));
    EXPECT_FALSE(ras_should_redraw(recent, 1, ras));
    EXPECT_FALSE(ras_should_redraw(recent, 5, ras));
    // Only the last 16 count: push the first 7 out of the window.
    for (int i = 0; i < 13; ++i) recent.push_back(100 + i);
    ASSERT_EQ(recent.size(), 17u);
    EXPECT_FALSE(ras_should_redraw(recent, 7, ras));
    recent.push_back(7);
    EXPECT_TRUE(ras_should_redraw(recent, 7, ras));
}

TEST(Philox, MatchesThePublishedKnownAnswers) {
    // Random123's kat_vectors for philox4x32_10.
    EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}), (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
    EXPECT_EQ(philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
              (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
    EXPECT_EQ(philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
              (std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, DrawsAreUniformAndDependOnEveryKeyPart) {
    std::set<float> seen;
    double sum = 0.0;
    for (uint64_t step = 0; step < 10000; ++step) {
        const float u = uniform_draw(42, step, 3);
        ASSERT_GE(u, 0.0f);
        ASSERT_LT(u, 1.0f);
        sum += u;
        seen.insert(u);
    }
    EXPECT_NEAR(sum / 10000, 0.5, 0.01);
    EXPECT_GT(seen.size(), 9990u);
    EXPECT_EQ(uniform_draw(1, 2, 3), uniform_draw(1, 2, 3));
    EXPECT_NE(uniform_draw(1, 2, 3), uniform_draw(2, 2, 3));
    EXPECT_NE(uniform_draw(1, 2, 3), uniform_draw(1, 3, 3));
    EXPECT_NE(uniform_draw(1, 2, 3), uniform_draw(1, 2, 4));
    EXPECT_NE(uniform_draw(1ull << 40, 2, 3), uniform_draw(0, 2, 3));
}

TEST(Ras, ARepeatedChoiceIsRedrawnFromTheFullDistribution) {
    const SamplingParams params{0.7f, 3, 0.9f, 21};
    const RasParams ras;
    const std::vector<int32_t> recent = {3, 9, 3};  // token 3 twice: redrawn whenever it is chosen
    std::vector<double> first(kLogits.size()), full(kLogits.size());
    sampling_distribution(kLogits, params, first);
    sampling_distribution(kLogits, {1.0f, 0, 1.0f, 0}, full);
    // P(y) = first(y) for y ≠ 3, plus first(3) · full(y) for every y.
    std::vector<double> expected(kLogits.size());
    for (size_t y = 0; y < expected.size(); ++y) expected[y] = (y == 3 ? 0.0 : first[y]) + first[3] * full[y];
    const int draws = 40000;
    std::vector<int> counts(kLogits.size(), 0);
    int redrawn = 0;
    for (int step = 0; step < draws; ++step) {
        const float u = uniform_draw(params.seed, step, 0), v = uniform_draw(params.seed, step, 1);
        const int32_t choice = sample_with_ras(kLogits, params, ras, recent, u, v);
        ++counts[choice];
        redrawn += sample_index(kLogits, params, u) == 3;
    }
    EXPECT_NEAR(double(redrawn) / draws, first[3], 0.01);
    // 9 degrees of freedom (every token reachable through the redraw), p = 0.001.
    EXPECT_LT(chi_square(counts, expected, draws), 27.88);
    // Not repeated, or exempt, or greedy: never redrawn.
    EXPECT_EQ(sample_with_ras(kLogits, params, ras, std::vector<int32_t>{3}, 0.0f, 0.99f), 3);
    EXPECT_EQ(sample_with_ras(kLogits, params, ras, recent, 0.0f, 0.99f, /*exempt=*/3), 3);
    EXPECT_EQ(sample_with_ras(kLogits, {0.0f, 3, 0.9f, 0}, ras, recent, 0.0f, 0.99f), 3);
}

}  // namespace
}  // namespace duet
