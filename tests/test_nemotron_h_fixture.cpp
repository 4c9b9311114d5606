// Nemotron-H against the transformers reference (fixtures/nemotron_h_tiny and its Transcribe-layout
// twin): prefill logits, every layer's hidden state, the greedy continuation and each step's logits.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "models/generate.h"
#include "models/nemotron_h/model.h"
#include "models/nemotron_h/speculative.h"
#include "causal_lm_fixture.h"
#include "test_support.h"

namespace duet::nemotron_h {
namespace {

using duet::testing::fixture_dir;
using duet::testing::relative_error;

constexpr double kTolerance = duet::testing::kFixtureTolerance;

class NemotronHFixture : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        dir_ = fixture_dir(GetParam());
        expected_ = std::make_unique<Checkpoint>(Checkpoint::open(dir_ + "/expected.safetensors"));
        prompt_ = duet::testing::read_i32(expected_->get("input_ids"));
    }
    std::vector<float> expected(const std::string& name) const { return read_f32(expected_->get(name)); }

    std::string dir_;
    std::unique_ptr<Checkpoint> expected_;
    std::vector<int32_t> prompt_;
    ThreadPool pool_{2};
    std::unique_ptr<Backend> backend_ = make_cpu_backend(&pool_);
};

TEST_P(NemotronHFixture, PrefillLogitsAndHiddenStatesMatch) {
    const Model model = Model::load(dir_);
    ASSERT_EQ(prompt_.size(), 20u) << "the prompt must cross Mamba-2 chunks of 8";
    duet::testing::expect_prefill_matches(model, *backend_, *expected_, static_cast<int64_t>(model.config().layers.size()),
                                          model.config().hidden);
}

TEST_P(NemotronHFixture, GreedyContinuationMatches) {
    duet::testing::expect_greedy_matches(Model::load(dir_), *backend_, *expected_);
}

TEST_P(NemotronHFixture, GreedyStepChecksItsInputs) {
    duet::testing::expect_greedy_step_checks(Model::load(dir_), *backend_, prompt_[0]);
}

TEST_P(NemotronHFixture, SpeculativeContinuationMatches) {
    const Model model = Model::load(dir_);
    State state = model.new_state(*backend_, 64);
    const std::vector<int32_t> greedy = duet::testing::read_i32(expected_->get("greedy_ids"));
    MtpDrafter drafter(model);
    SpeculativeStats stats;
    const GreedyOutput out = speculative_greedy(model, *backend_, state, prompt_,
                                                static_cast<int64_t>(greedy.size()), drafter, &stats);
    EXPECT_EQ(out.ids, greedy);
    EXPECT_GT(stats.rounds, 0);
}

// A batched prefill and token-by-token decode are the same function: same logits at every
// position, same final state.
TEST_P(NemotronHFixture, BatchedPrefillEqualsTokenByTokenDecode) {
    const Model model = Model::load(dir_);
    const int64_t vocab = model.config().vocab;
    State batched = model.new_state(*backend_, 64);
    const std::vector<float> all = model.forward(*backend_, batched, prompt_, true);

    State stepwise = model.new_state(*backend_, 64);
    for (size_t t = 0; t < prompt_.size(); ++t) {
        const std::vector<float> one =
            model.forward(*backend_, stepwise, std::span<const int32_t>(&prompt_[t], 1), false);
        EXPECT_LE(relative_error(one.data(), all.data() + t * vocab, static_cast<size_t>(vocab)), 1e-5)
            << "position " << t;
    }
    EXPECT_EQ(batched.position(), stepwise.position());
    auto same = [](const Buffer& a, const Buffer& b) {
        return relative_error(a.data(), b.data(), a.size()) <= 1e-5;
    };
    for (int64_t s = 0; s < batched.mamba_layers(); ++s) {
        EXPECT_TRUE(same(batched.ssm_buffer(s), stepwise.ssm_buffer(s))) << "ssm state " << s;
        EXPECT_TRUE(same(batched.conv_buffer(s), stepwise.conv_buffer(s))) << "conv ring " << s;
    }
    for (int64_t s = 0; s < batched.attention_layers(); ++s) {
        EXPECT_TRUE(same(batched.keys_buffer(s), stepwise.keys_buffer(s))) << "keys " << s;
    }
}

// The draft module: position t fuses the embedding of token t+1 with the main model's final-normed
// hidden state at t, and predicts token t+2.
TEST_P(NemotronHFixture, DraftLogitsMatch) {
    const Model model = Model::load(dir_);
    ASSERT_TRUE(model.has_draft());
    const int64_t t = static_cast<int64_t>(prompt_.size()), h = model.config().hidden;
    State state = model.new_state(*backend_, 64);
    std::vector<float> final_hidden;
    model.forward(*backend_, state, prompt_, false, {}, &final_hidden);
    const std::span<const float> hidden(final_hidden.data(), static_cast<size_t>((t - 1) * h));
    const std::span<const int32_t> next(prompt_.data() + 1, static_cast<size_t>(t - 1));
    const std::vector<float> draft = model.draft_forward(*backend_, state, hidden, next, true);
    EXPECT_LE(relative_error(draft, expected("mtp_logits")), kTolerance);
    EXPECT_EQ(state.draft_position(), t - 1);
}

TEST_P(NemotronHFixture, ThreadCountDoesNotChangeResults) {
    const Model model = Model::load(dir_);
    ThreadPool single(1);
    std::unique_ptr<Backend> serial = make_cpu_backend(&single);
    State a = model.new_state(*backend_, 64);
    State b = model.new_state(*serial, 64);
    EXPECT_EQ(model.forward(*backend_, a, prompt_, true), model.forward(*serial, b, prompt_, true));
}

INSTANTIATE_TEST_SUITE_P(BothLayouts, NemotronHFixture,
                         ::testing::Values("nemotron_h_tiny", "nemotron_h_tiny_transcribe_layout"));

TEST(NemotronHLayout, BothLayoutsAreDetected) {
    EXPECT_EQ(Model::load(fixture_dir("nemotron_h_tiny")).layout(), "hub");
    EXPECT_EQ(Model::load(fixture_dir("nemotron_h_tiny_transcribe_layout")).layout(), "transcribe");
}

}  // namespace
}  // namespace duet::nemotron_h
