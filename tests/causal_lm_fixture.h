// The checks every architecture's golden fixture gets: prefill logits and every hidden state, then
// the greedy continuation and the logits that chose each token.
#pragma once

#include <gtest/gtest.h>

#include "models/causal_lm.h"
#include "models/generate.h"
#include "test_support.h"

namespace duet::testing {

// fixtures/README.md: unquantized weights, f32 arithmetic.
constexpr double kFixtureTolerance = 2e-4;

inline void expect_prefill_matches(const CausalLM& model, Backend& backend, const Checkpoint& expected,
                                   int64_t layers, int64_t hidden) {
    const std::vector<int32_t> prompt = read_i32(expected.get("input_ids"));
    const int64_t t = static_cast<int64_t>(prompt.size());
    const std::vector<float> hidden_expected = read_f32(expected.get("hidden_states"));
    ASSERT_EQ(hidden_expected.size(), static_cast<size_t>((layers + 1) * t * hidden));
    const std::unique_ptr<SequenceState> state = model.create_state(backend, t);
    int64_t hooks = 0;
    const std::vector<float> logits =
        model.forward(backend, *state, prompt, true, [&](int64_t index, const float* rows, int64_t n) {
            ASSERT_EQ(n, t);
            const float* ref = hidden_expected.data() + index * t * hidden;
            EXPECT_LE(relative_error(rows, ref, static_cast<size_t>(t * hidden)), kFixtureTolerance)
                << "hidden state " << index;
            ++hooks;
        });
    EXPECT_EQ(hooks, layers + 1);
    EXPECT_LE(relative_error(logits, read_f32(expected.get("prefill_logits"))), kFixtureTolerance);
}

inline void expect_greedy_matches(const CausalLM& model, Backend& backend, const Checkpoint& expected) {
    const std::vector<int32_t> prompt = read_i32(expected.get("input_ids"));
    const std::vector<int32_t> greedy = read_i32(expected.get("greedy_ids"));
    const std::unique_ptr<SequenceState> state =
        model.create_state(backend, static_cast<int64_t>(prompt.size() + greedy.size()));
    const GreedyOutput out =
        generate_greedy(model, backend, *state, prompt, static_cast<int64_t>(greedy.size()), true);
    EXPECT_EQ(out.ids, greedy);
    const std::vector<float> steps = read_f32(expected.get("step_logits"));
    const int64_t vocab = model.vocab();
    ASSERT_EQ(out.step_logits.size(), steps.size());
    for (size_t j = 0; j < greedy.size(); ++j) {
        EXPECT_LE(relative_error(out.step_logits.data() + j * vocab, steps.data() + j * vocab,
                                 static_cast<size_t>(vocab)),
                  kFixtureTolerance)
            << "step " << j;
    }
    // Without the step logits generation takes the model's own greedy step (next_greedy), which
    // may choose on the backend: the same tokens.
    const std::unique_ptr<SequenceState> fresh =
        model.create_state(backend, static_cast<int64_t>(prompt.size() + greedy.size()));
    EXPECT_EQ(generate_greedy(model, backend, *fresh, prompt, static_cast<int64_t>(greedy.size())).ids, greedy);
}

// The greedy step refuses what forward refuses, leaving the state where it was, and chooses what
// forward's logits choose.
inline void expect_greedy_step_checks(const CausalLM& model, Backend& backend, int32_t id) {
    const std::unique_ptr<SequenceState> state = model.create_state(backend, 1);
    const auto vocab = static_cast<int32_t>(model.vocab());
    EXPECT_THROW(model.next_greedy(backend, *state, vocab), Error);
    EXPECT_THROW(model.next_greedy(backend, *state, -1), Error);
    EXPECT_EQ(state->position(), 0);
    const int32_t first = model.next_greedy(backend, *state, id);
    const std::unique_ptr<SequenceState> other = model.create_state(backend, 1);
    const std::vector<float> logits = model.forward(backend, *other, std::span<const int32_t>(&id, 1), false);
    EXPECT_EQ(first, argmax(logits.data(), vocab));
    EXPECT_EQ(state->position(), 1);
    EXPECT_THROW(model.next_greedy(backend, *state, first), Error);
    EXPECT_EQ(state->position(), 1);
}

}  // namespace duet::testing
