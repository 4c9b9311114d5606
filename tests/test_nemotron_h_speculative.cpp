// Speculative decoding is greedy-exact: whatever the drafter proposes, the output is the plain
// greedy output token for token, and the state ends where plain decoding leaves it.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "models/generate.h"
#include "models/nemotron_h/model.h"
#include "models/nemotron_h/speculative.h"
#include "sample/greedy.h"
#include "test_support.h"

namespace duet::nemotron_h {
namespace {

using duet::testing::fixture_dir;

// Drafts what the main model itself will say (a second copy of the sequence runs ahead), so every
// draft is kept; with `wrong` it drafts the token after that one, so every draft is rejected.
class OracleDrafter final : public Drafter {
public:
    OracleDrafter(const Model& model, Backend& backend, int32_t first_token, bool wrong)
        : model_(model), state_(model.new_state(backend, 256)), wrong_(wrong) {
        model_.forward(backend, state_, std::span<const int32_t>(&first_token, 1), false);
    }
    int32_t extend(Backend& backend, State&, std::span<const float>, std::span<const int32_t> next_ids,
                   std::span<const EmbeddingPatch>) override {
        const std::vector<float> logits = model_.forward(backend, state_, next_ids, false);
        const int32_t best = argmax(logits.data(), model_.vocab());
        return wrong_ ? (best + 1) % static_cast<int32_t>(model_.vocab()) : best;
    }

private:
    const Model& model_;
    State state_;
    bool wrong_;
};

class NemotronHSpeculative : public ::testing::TestWithParam<std::string> {
protected:
    std::vector<int32_t> plain(const std::vector<int32_t>& prompt, int64_t count) {
        State state = model_.new_state(*backend_, 256);
        return generate_greedy(model_, *backend_, state, prompt, count).ids;
    }
    std::vector<int32_t> random_prompt(size_t length, uint32_t seed) {
        std::vector<int32_t> ids;
        for (size_t i = 0; i < length; ++i) {
            seed = seed * 1664525u + 1013904223u;
            ids.push_back(static_cast<int32_t>(seed >> 8) % static_cast<int32_t>(model_.vocab()));
        }
        return ids;
    }

    ThreadPool pool_{2};
    std::unique_ptr<Backend> backend_ = make_cpu_backend(&pool_);
    Model model_ = Model::load(fixture_dir(GetParam()));
};

TEST_P(NemotronHSpeculative, DraftModuleOutputEqualsPlainGreedy) {
    MtpDrafter drafter(model_);
    for (size_t length : {1, 2, 5, 20, 33}) {
        for (int64_t count : {1, 2, 3, 12, 40}) {
            const std::vector<int32_t> prompt = random_prompt(length, static_cast<uint32_t>(length * 7 + count));
            State state = model_.new_state(*backend_, 256);
            SpeculativeStats stats;
            const GreedyOutput out = speculative_greedy(model_, *backend_, state, prompt, count, drafter, &stats);
            EXPECT_EQ(out.ids, plain(prompt, count)) << "prompt length " << length << ", " << count << " tokens";
            EXPECT_EQ(stats.tokens, count);
            EXPECT_LE(stats.passes, count);
        }
    }
}

TEST_P(NemotronHSpeculative, EveryDraftKeptOrEveryDraftRejected) {
    const std::vector<int32_t> prompt = random_prompt(9, 5);
    const std::vector<int32_t> expected = plain(prompt, 30);
    for (bool wrong : {false, true}) {
        OracleDrafter drafter(model_, *backend_, prompt[0], wrong);
        State state = model_.new_state(*backend_, 256);
        SpeculativeStats stats;
        EXPECT_EQ(speculative_greedy(model_, *backend_, state, prompt, 30, drafter, &stats).ids, expected);
        ASSERT_GT(stats.rounds, 0);
        EXPECT_EQ(stats.drafts_kept, wrong ? 0 : stats.rounds) << (wrong ? "rejecting" : "accepting") << " drafter";
        if (!wrong) {
            EXPECT_GT(stats.tokens_per_pass(), 1.8);
        }
    }
}

// After a run with rejections the recurrent state is exactly where plain decoding leaves it.
TEST_P(NemotronHSpeculative, RollBackRestoresTheStateExactly) {
    const std::vector<int32_t> prompt = random_prompt(6, 11);
    OracleDrafter drafter(model_, *backend_, prompt[0], /*wrong=*/true);
    State spec = model_.new_state(*backend_, 256);
    const GreedyOutput out = speculative_greedy(model_, *backend_, spec, prompt, 9, drafter);

    State reference = model_.new_state(*backend_, 256);
    std::vector<int32_t> fed = prompt;
    fed.insert(fed.end(), out.ids.begin(), out.ids.end() - 1);
    model_.forward(*backend_, reference, fed, false);
    ASSERT_EQ(spec.position(), reference.position());
    for (int64_t slot = 0; slot < spec.mamba_layers(); ++slot) {
        const Buffer& a = spec.ssm_buffer(slot);
        const Buffer& b = reference.ssm_buffer(slot);
        EXPECT_EQ(std::vector<float>(a.data(), a.data() + a.size()), std::vector<float>(b.data(), b.data() + b.size()))
            << "ssm state " << slot;
        const Buffer& ca = spec.conv_buffer(slot);
        const Buffer& cb = reference.conv_buffer(slot);
        EXPECT_EQ(std::vector<float>(ca.data(), ca.data() + ca.size()),
                  std::vector<float>(cb.data(), cb.data() + cb.size()))
            << "conv ring " << slot;
    }
}

// Embedding patches (audio rows over placeholders) and a stop token: speculation still equals plain
// greedy decoding, a patch holding a token's own embedding changes nothing, and other rows do.
TEST_P(NemotronHSpeculative, PatchedPromptsAndStopTokensMatchPlainDecoding) {
    const std::vector<int32_t> prompt = random_prompt(14, 21);
    const int64_t hidden = model_.config().hidden;
    std::vector<float> rows(static_cast<size_t>(5 * hidden));
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = 0.05f * static_cast<float>((i * 37) % 41) - 1.0f;
    const EmbeddingPatch patch{3, 5, rows.data()};
    auto decode = [&](std::span<const EmbeddingPatch> patches, int32_t stop, bool speculative) {
        State state = model_.new_state(*backend_, 256);
        const DecodeRequest request{prompt, patches, 20, stop};
        if (!speculative) return greedy_decode(model_, *backend_, state, request).ids;
        MtpDrafter drafter(model_);
        return speculative_greedy(model_, *backend_, state, request, drafter).ids;
    };
    const std::vector<int32_t> patched = decode({&patch, 1}, -1, false);
    EXPECT_EQ(decode({&patch, 1}, -1, true), patched);
    EXPECT_NE(patched, plain(prompt, 20));

    // The embedding table's own rows as a patch: the same as no patch.
    std::vector<float> own(static_cast<size_t>(5 * hidden));
    backend_->embed(model_.weights().embed, prompt.data() + 3, 5, own.data());
    const EmbeddingPatch same{3, 5, own.data()};
    EXPECT_EQ(decode({&same, 1}, -1, false), plain(prompt, 20));

    // A patch on the first position (whose row the draft never reads) and a stop token.
    const EmbeddingPatch first{0, 2, rows.data()};
    const std::vector<int32_t> full = decode({&first, 1}, -1, false);
    EXPECT_EQ(decode({&first, 1}, -1, true), full);
    const int32_t stop = full[6];
    const size_t stop_at = static_cast<size_t>(std::find(full.begin(), full.end(), stop) - full.begin());
    const std::vector<int32_t> until(full.begin(), full.begin() + stop_at + 1);
    EXPECT_EQ(decode({&first, 1}, stop, false), until);
    EXPECT_EQ(decode({&first, 1}, stop, true), until);

    const EmbeddingPatch outside{12, 5, rows.data()};
    EXPECT_THROW(decode({&outside, 1}, -1, false), Error);
}

// The draft reads each prompt position with the id that follows it: a patch moves back one place.
TEST(NemotronHDraftPatches, FallOnTheFollowingPositions) {
    const float rows[8] = {};
    const EmbeddingPatch patches[] = {{0, 2, rows}, {3, 1, rows + 4}, {0, 1, rows}};
    const std::vector<EmbeddingPatch> shifted = patches_on_followers(patches, 2);
    ASSERT_EQ(shifted.size(), 2u);
    EXPECT_EQ(shifted[0].first, 0);
    EXPECT_EQ(shifted[0].count, 1);
    EXPECT_EQ(shifted[0].rows, rows + 2);
    EXPECT_EQ(shifted[1].first, 2);
    EXPECT_EQ(shifted[1].count, 1);
    EXPECT_EQ(shifted[1].rows, rows + 4);
}

INSTANTIATE_TEST_SUITE_P(BothLayouts, NemotronHSpeculative,
                         ::testing::Values("nemotron_h_tiny", "nemotron_h_tiny_transcribe_layout"));

TEST(NemotronHDraftModule, AbsentIsFinePartialIsALoadError) {
    duet::testing::TempDir dir("draft");
    const Checkpoint fixture = Checkpoint::open(fixture_dir("nemotron_h_tiny"));
    duet::testing::write_bytes(dir.file("config.json"),
                               duet::testing::read_bytes(fixture_dir("nemotron_h_tiny") + "/config.json"));
    auto write_without = [&](auto drop) {
        std::vector<TensorToWrite> tensors;
        for (const TensorEntry* t : fixture.all()) {
            if (!drop(t->name)) tensors.push_back({t->name, t->dtype, t->shape, t->data, t->nbytes});
        }
        write_safetensors(dir.file("model.safetensors"), tensors);
    };
    write_without([](const std::string& name) { return name.starts_with("mtp."); });
    EXPECT_FALSE(Model::load(dir.path()).has_draft());
    write_without([](const std::string& name) { return name == "mtp.layers.1.final_layernorm.weight"; });
    const std::string error = duet::testing::error_of([&] { Model::load(dir.path()); });
    EXPECT_NE(error.find("'mtp.layers.1.final_layernorm.weight' missing"), std::string::npos) << error;
}

}  // namespace
}  // namespace duet::nemotron_h

namespace duet::nemotron_h {
namespace {

std::string run_generate(const std::string& arguments, std::string* err) {
    const duet::testing::CliResult result = duet::testing::run_duet("generate " + arguments);
    EXPECT_EQ(result.exit_code, 0) << arguments << "\n" << result.err;
    *err = result.err;
    return result.out;
}

TEST(NemotronHSpeculativeCli, SameIdsWithStatsOnStderrAndPlainDecodingWithoutADraftModule) {
    const std::string dir = fixture_dir("nemotron_h_tiny");
    std::string err;
    const std::string plain = run_generate("--model " + dir + " --ids 4,8,15,16 -n 10", &err);
    EXPECT_EQ(run_generate("--model " + dir + " --ids 4,8,15,16 -n 10 --speculative --stats", &err), plain);
    EXPECT_NE(err.find("drafts kept"), std::string::npos) << err;

    duet::testing::TempDir no_draft("no-draft");
    const Checkpoint fixture = Checkpoint::open(dir);
    std::vector<TensorToWrite> tensors;
    for (const TensorEntry* t : fixture.all()) {
        if (!t->name.starts_with("mtp.")) tensors.push_back({t->name, t->dtype, t->shape, t->data, t->nbytes});
    }
    write_safetensors(no_draft.file("model.safetensors"), tensors);
    duet::testing::write_bytes(no_draft.file("config.json"), duet::testing::read_bytes(dir + "/config.json"));
    EXPECT_EQ(run_generate("--model " + no_draft.path() + " --ids 4,8,15,16 -n 10 --speculative", &err), plain);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find("no draft module"), std::string::npos) << err;
}

}  // namespace
}  // namespace duet::nemotron_h
