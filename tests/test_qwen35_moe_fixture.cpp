// Qwen3.5-MoE against the transformers reference (fixtures/qwen35_moe_tiny): prefill logits over a
// 70-token prompt (the chunked Gated DeltaNet crosses a chunk boundary), every layer's hidden state,
// the greedy continuation and each step's logits; then the chunked prefill against the recurrence,
// the other checkpoint layouts, and the registry and CLI paths.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "models/generate.h"
#include "models/qwen35_moe/model.h"
#include "models/qwen35_moe/presets.h"
#include "models/registry.h"
#include "causal_lm_fixture.h"
#include "test_support.h"

namespace duet::qwen35_moe {
namespace {

using duet::testing::fixture_dir;
using duet::testing::relative_error;

constexpr double kTolerance = duet::testing::kFixtureTolerance;

class Qwen35MoeFixture : public ::testing::Test {
protected:
    void SetUp() override {
        expected_ = std::make_unique<Checkpoint>(Checkpoint::open(dir_ + "/expected.safetensors"));
        prompt_ = duet::testing::read_i32(expected_->get("input_ids"));
    }
    std::vector<float> expected(const std::string& name) const { return read_f32(expected_->get(name)); }

    std::string dir_ = fixture_dir("qwen35_moe_tiny");
    std::unique_ptr<Checkpoint> expected_;
    std::vector<int32_t> prompt_;
    ThreadPool pool_{2};
    std::unique_ptr<Backend> backend_ = make_cpu_backend(&pool_);
};

TEST_F(Qwen35MoeFixture, PrefillLogitsAndHiddenStatesMatch) {
    const Model model = Model::load(dir_);
    ASSERT_EQ(prompt_.size(), 70u) << "the prompt must cross a 64-token chunk";
    duet::testing::expect_prefill_matches(model, *backend_, *expected_, static_cast<int64_t>(model.config().layers.size()),
                                          model.config().hidden);
}

TEST_F(Qwen35MoeFixture, GreedyContinuationMatches) {
    duet::testing::expect_greedy_matches(Model::load(dir_), *backend_, *expected_);
}

TEST_F(Qwen35MoeFixture, GreedyStepChecksItsInputs) {
    duet::testing::expect_greedy_step_checks(Model::load(dir_), *backend_, prompt_[0]);
}

// Every piece of a state, compared buffer by buffer.
void expect_same_state(State& a, State& b, double tolerance) {
    EXPECT_EQ(a.position(), b.position());
    auto close = [&](const Buffer& x, const Buffer& y, size_t count) {
        return relative_error(x.data(), y.data(), count) <= tolerance;
    };
    for (int64_t s = 0; s < a.linear_layers(); ++s) {
        EXPECT_TRUE(close(a.delta_buffer(s), b.delta_buffer(s), a.delta_buffer(s).size())) << "delta state " << s;
        EXPECT_TRUE(close(a.conv_buffer(s), b.conv_buffer(s), a.conv_buffer(s).size())) << "conv ring " << s;
    }
    const size_t used = static_cast<size_t>(a.position()) * (a.keys_buffer(0).size() / static_cast<size_t>(a.capacity()));
    for (int64_t s = 0; s < a.attention_layers(); ++s) {
        EXPECT_TRUE(close(a.keys_buffer(s), b.keys_buffer(s), used)) << "keys " << s;
        EXPECT_TRUE(close(a.values_buffer(s), b.values_buffer(s), used)) << "values " << s;
    }
}

// A deterministic prompt of any length, from the fixture's prompt repeated with an offset.
std::vector<int32_t> prompt_of_length(const std::vector<int32_t>& base, int64_t length) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < length; ++i) {
        ids.push_back((base[i % base.size()] + 7 * static_cast<int32_t>(i / base.size())) % 512);
    }
    return ids;
}

// The chunked prefill (chunks of 64) and the token-by-token recurrence are the same function: same
// logits at every position and the same final state, across and at the chunk boundary.
TEST_F(Qwen35MoeFixture, ChunkedPrefillEqualsTokenByTokenRecurrence) {
    const Model model = Model::load(dir_);
    const int64_t vocab = model.config().vocab;
    for (int64_t length : {1, 63, 64, 65, 200}) {
        SCOPED_TRACE("prompt of " + std::to_string(length));
        const std::vector<int32_t> ids = prompt_of_length(prompt_, length);
        State chunked = model.new_state(*backend_, 256);
        const std::vector<float> all = model.forward(*backend_, chunked, ids, true);
        State stepwise = model.new_state(*backend_, 256);
        double worst = 0.0;
        for (int64_t t = 0; t < length; ++t) {
            const std::vector<float> one =
                model.forward(*backend_, stepwise, std::span<const int32_t>(&ids[t], 1), false);
            worst = std::max(worst, relative_error(one.data(), all.data() + t * vocab, static_cast<size_t>(vocab)));
        }
        EXPECT_LE(worst, 2e-5);
        expect_same_state(chunked, stepwise, 2e-5);

        // The recurrence over the whole prompt in one call gives the same again.
        State recurrent = model.new_state(*backend_, 256);
        const std::vector<float> all_recurrent = model.forward(*backend_, recurrent, ids, true, {}, 0);
        EXPECT_LE(relative_error(all_recurrent, all), 2e-5);
        expect_same_state(chunked, recurrent, 2e-5);
    }
}

// A prefill split at arbitrary points (37 + 50 tokens, then decode) continues exactly where the
// recurrence over the same tokens would be.
TEST_F(Qwen35MoeFixture, SplitPrefillEqualsTokenByTokenRecurrence) {
    const Model model = Model::load(dir_);
    const int64_t vocab = model.config().vocab;
    const std::vector<int32_t> ids = prompt_of_length(prompt_, 37 + 50 + 5);
    State split = model.new_state(*backend_, 128);
    std::vector<float> logits = model.forward(*backend_, split, std::span<const int32_t>(ids.data(), 37), true);
    const std::vector<float> second = model.forward(*backend_, split, std::span<const int32_t>(ids.data() + 37, 50), true);
    logits.insert(logits.end(), second.begin(), second.end());
    for (size_t t = 87; t < ids.size(); ++t) {
        const std::vector<float> one = model.forward(*backend_, split, std::span<const int32_t>(&ids[t], 1), false);
        logits.insert(logits.end(), one.begin(), one.end());
    }
    State stepwise = model.new_state(*backend_, 128);
    std::vector<float> reference;
    for (size_t t = 0; t < ids.size(); ++t) {
        const std::vector<float> one = model.forward(*backend_, stepwise, std::span<const int32_t>(&ids[t], 1), false);
        reference.insert(reference.end(), one.begin(), one.end());
    }
    ASSERT_EQ(logits.size(), ids.size() * static_cast<size_t>(vocab));
    EXPECT_LE(relative_error(logits, reference), 2e-5);
    expect_same_state(split, stepwise, 2e-5);
}

TEST_F(Qwen35MoeFixture, ThreadCountDoesNotChangeResults) {
    const Model model = Model::load(dir_);
    ThreadPool single(1);
    std::unique_ptr<Backend> serial = make_cpu_backend(&single);
    State a = model.new_state(*backend_, 128);
    State b = model.new_state(*serial, 128);
    EXPECT_EQ(model.forward(*backend_, a, prompt_, true), model.forward(*serial, b, prompt_, true));
}

TEST_F(Qwen35MoeFixture, ResetStateRepeatsTheSameResult) {
    const Model model = Model::load(dir_);
    State state = model.new_state(*backend_, 128);
    const std::vector<float> first = model.forward(*backend_, state, prompt_, false);
    state.reset(*backend_);
    EXPECT_EQ(model.forward(*backend_, state, prompt_, false), first);
}

// The fixture's weights rewritten as `prefix` names, with the experts fused into
// gate_up_proj [E, 2I, H] (gate rows first) and down_proj [E, H, I] when `fused`.
void write_relaid_checkpoint(const std::string& dir, const std::string& prefix, bool fused) {
    const Checkpoint source = Checkpoint::open(fixture_dir("qwen35_moe_tiny"));
    const Config c = load_config(fixture_dir("qwen35_moe_tiny") + "/config.json");
    std::vector<TensorToWrite> tensors;
    std::vector<std::unique_ptr<std::vector<uint8_t>>> owned;
    for (const TensorEntry* t : source.all()) {
        std::string name = t->name;
        if (name.rfind("model.", 0) == 0) name = prefix + name.substr(6);
        if (fused && name.find(".mlp.experts.") != std::string::npos) continue;
        tensors.push_back({name, t->dtype, t->shape, t->data, t->nbytes});
    }
    if (fused) {
        for (size_t i = 0; i < c.layers.size(); ++i) {
            const std::string from = "model.layers." + std::to_string(i) + ".mlp.experts.";
            const std::string to = prefix + "layers." + std::to_string(i) + ".mlp.experts.";
            auto gate_up = std::make_unique<std::vector<uint8_t>>();
            auto down = std::make_unique<std::vector<uint8_t>>();
            for (int64_t e = 0; e < c.experts; ++e) {
                for (const char* part : {"gate_proj", "up_proj"}) {
                    const TensorEntry& t = source.get(from + std::to_string(e) + "." + part + ".weight");
                    gate_up->insert(gate_up->end(), t.data, t.data + t.nbytes);
                }
                const TensorEntry& d = source.get(from + std::to_string(e) + ".down_proj.weight");
                down->insert(down->end(), d.data, d.data + d.nbytes);
            }
            tensors.push_back({to + "gate_up_proj", DType::BF16, {c.experts, 2 * c.expert_inter, c.hidden},
                               gate_up->data(), gate_up->size()});
            tensors.push_back({to + "down_proj", DType::BF16, {c.experts, c.hidden, c.expert_inter}, down->data(),
                               down->size()});
            owned.push_back(std::move(gate_up));
            owned.push_back(std::move(down));
        }
    }
    write_safetensors(dir + "/model.safetensors", tensors);
    duet::testing::write_bytes(dir + "/config.json",
                               duet::testing::read_bytes(fixture_dir("qwen35_moe_tiny") + "/config.json"));
}

TEST_F(Qwen35MoeFixture, EveryLayoutGivesTheSameLogits) {
    const Model reference = Model::load(dir_);
    State state = reference.new_state(*backend_, 128);
    const std::vector<float> expected_logits = reference.forward(*backend_, state, prompt_, true);
    struct Case {
        std::string prefix;
        bool fused;
    };
    for (const Case& layout : {Case{"model.language_model.", true}, Case{"model.language_model.", false},
                               Case{"model.", true}, Case{"text_model.model.", false}}) {
        SCOPED_TRACE(layout.prefix + (layout.fused ? " fused" : " per-expert"));
        duet::testing::TempDir tmp("qwen-layout");
        write_relaid_checkpoint(tmp.path(), layout.prefix, layout.fused);
        const Model model = Model::load(tmp.path());
        EXPECT_EQ(model.layout().prefix, layout.prefix);
        EXPECT_EQ(model.layout().fused_experts, layout.fused);
        State s = model.new_state(*backend_, 128);
        EXPECT_EQ(model.forward(*backend_, s, prompt_, true), expected_logits);
    }
}

// Drama 3's checkpoint carries this backbone under model.language_model. with fused experts and its
// text fields under text_config.
TEST_F(Qwen35MoeFixture, Drama3BackboneLoads) {
    const Model model = Model::load(fixture_dir("drama3_tiny"));
    EXPECT_EQ(model.layout().prefix, "model.language_model.");
    EXPECT_TRUE(model.layout().fused_experts);
    EXPECT_EQ(model.config().pattern(), "LLLF");
    State state = model.new_state(*backend_, 16);
    const std::vector<float> logits = model.forward(*backend_, state, std::vector<int32_t>{1, 2, 3}, false);
    ASSERT_EQ(logits.size(), static_cast<size_t>(model.config().vocab));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(Qwen35MoeFixture, RegistryAndCliRunTheCheckpoint) {
    const std::unique_ptr<CausalLM> model = load_causal_lm(dir_);
    EXPECT_EQ(model->arch(), "qwen35_moe");
    auto state = model->create_state(*backend_, 128);
    const std::vector<int32_t> greedy = duet::testing::read_i32(expected_->get("greedy_ids"));
    EXPECT_EQ(generate_greedy(*model, *backend_, *state, prompt_, 3).ids,
              std::vector<int32_t>(greedy.begin(), greedy.begin() + 3));

    std::string ids;
    for (size_t i = 0; i < prompt_.size(); ++i) ids += (i ? "," : "") + std::to_string(prompt_[i]);
    const duet::testing::CliResult result = duet::testing::run_duet("generate --model " + dir_ + " --ids " + ids + " -n 10");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    std::string expected_line;
    for (size_t i = 0; i < greedy.size(); ++i) expected_line += (i ? " " : "") + std::to_string(greedy[i]);
    EXPECT_EQ(result.out, expected_line + "\n");
}

TEST(Qwen35MoePresets, TinyPresetRunsWithRandomWeights) {
    ThreadPool pool(2);
    auto backend = make_cpu_backend(&pool);
    const std::unique_ptr<CausalLM> model = random_causal_lm("qwen35_moe", "tiny", 1, &pool);
    EXPECT_EQ(model->vocab(), 512);
    EXPECT_EQ(model->tensor_bytes(), random_causal_lm_bytes("qwen35_moe", "tiny"));
    auto state = model->create_state(*backend, 80);
    const std::vector<float> logits = model->forward(*backend, *state, prompt_of_length({1, 2, 3}, 70), false);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    EXPECT_THROW(random_causal_lm_bytes("qwen35_moe", "huge"), Error);
    // The real widths: a3b-8l must fit a machine with 24 GB, a3b is the full 35B.
    EXPECT_LT(random_causal_lm_bytes("qwen35_moe", "a3b-8l"), size_t{20} << 30);
    EXPECT_NEAR(static_cast<double>(preset_config("a3b").parameter_count()), 35e9, 2e9);
}

}  // namespace
}  // namespace duet::qwen35_moe
