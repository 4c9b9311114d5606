// The Drama 3 frame loop beyond the fixture: seeds, feeding a conversation in turns, stopping,
// and the errors a bad config, bad codes or a full context give.
#include <filesystem>
#include <fstream>
#include <memory>

#include "base/json.h"
#include "base/thread_pool.h"
#include "drama3_test_models.h"
#include "models/drama3/model.h"
#include "models/drama3/speaker.h"
#include "test_support.h"

namespace duet::drama3 {
namespace {

using testing::error_of;
using testing::fixture_dir;
using testing::read_i32;

class Drama3Speaker : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        model_ = std::make_unique<Model>(Model::load(fixture_dir("drama3_tiny")));
        const Checkpoint expected = Checkpoint::open(fixture_dir("drama3_tiny") + "/expected.safetensors");
        prompt_values_ = read_i32(expected.get("prompt_frames"));
    }
    static void TearDownTestSuite() { model_.reset(); }

    void SetUp() override { backend_ = make_cpu_backend(&pool_); }

    static text::FrameRows rows(std::span<const int32_t> values) {
        return testing::drama3_frame_rows(model_->config(), values);
    }
    static text::FrameRows prompt() { return rows(prompt_values_); }

    SpokenFrames speak(uint64_t seed, int64_t frames, float temperature = 1.0f) {
        Speaker speaker(*model_, *backend_, 128);
        speaker.feed(prompt());
        FrameSampling sampling;
        sampling.params = {temperature, 30, 0.9f, seed};
        return speak_frames(speaker, sampling, frames);
    }

    static std::unique_ptr<Model> model_;
    static std::vector<int32_t> prompt_values_;
    ThreadPool pool_{2};
    std::unique_ptr<Backend> backend_;
};
std::unique_ptr<Model> Drama3Speaker::model_;
std::vector<int32_t> Drama3Speaker::prompt_values_;

TEST_F(Drama3Speaker, OneSeedGivesOneRunAndAnotherSeedAnother) {
    const SpokenFrames a = speak(7, 12), b = speak(7, 12), c = speak(8, 12);
    EXPECT_EQ(a.frames.values(), b.frames.values());
    EXPECT_NE(a.frames.values(), c.frames.values());
    for (const SpokenFrames* run : {&a, &c}) {
        for (size_t r = 0; r < run->frames.count(); ++r) {
            model_->check_frames(run->frames.row(r), "drawn frame");  // every code inside its codebook
        }
    }
}

TEST_F(Drama3Speaker, FeedingInTurnsEqualsFeedingEverythingAtOnce) {
    // Speak a few frames, then continue the conversation with more prompt rows: the tower caches
    // must hold what one feed of the whole history would have put there.
    const text::FrameRows head = prompt();
    Speaker turns(*model_, *backend_, 128);
    turns.feed(head);
    FrameSampling greedy;
    greedy.params.temperature = 0.0f;
    const SpokenFrames spoken = speak_frames(turns, greedy, 4);
    ASSERT_EQ(spoken.reason, StopReason::FrameBudget);
    const text::FrameRows more = rows(std::span(prompt_values_).subspan(0, 5 * 11));
    turns.feed(more);

    text::FrameRows all = head;
    all.append(spoken.frames);
    all.append(more);
    Speaker whole(*model_, *backend_, 128);
    whole.feed(all);
    ASSERT_EQ(turns.position(), whole.position());

    std::vector<FrameTrace> a, b;
    EXPECT_EQ(speak_frames(turns, greedy, 6, {}, &a).frames.values(), speak_frames(whole, greedy, 6, {}, &b).frames.values());
    for (size_t g = 0; g < a.size(); ++g) {
        EXPECT_LE(testing::relative_error(a[g].head_logits, b[g].head_logits), 1e-5) << "frame " << g;
    }
}

TEST_F(Drama3Speaker, StopsAtTheFrameBudgetTheContextAndTheListener) {
    Speaker speaker(*model_, *backend_, static_cast<int64_t>(prompt().count()) + 3);
    speaker.feed(prompt());
    FrameSampling greedy;
    greedy.params.temperature = 0.0f;
    const SpokenFrames full = speak_frames(speaker, greedy, 50);
    EXPECT_EQ(full.reason, StopReason::Capacity);
    EXPECT_EQ(full.frames.count(), 3u);

    Speaker listened(*model_, *backend_, 64);
    listened.feed(prompt());
    int seen = 0;
    const SpokenFrames stopped = speak_frames(listened, greedy, 50, [&](std::span<const int32_t>) { return ++seen < 2; });
    EXPECT_EQ(stopped.reason, StopReason::Listener);
    EXPECT_EQ(stopped.frames.count(), 2u);
}

TEST_F(Drama3Speaker, EosEndsTheRunAndIsNotFed) {
    const Config& config = model_->config();
    const Model eos_model = testing::drama3_preferring_eos(50.0f);  // EOS wins the first frame
    Speaker speaker(eos_model, *backend_, 64);
    speaker.feed(prompt());
    const int64_t before = speaker.position();
    FrameSampling greedy;
    greedy.params.temperature = 0.0f;
    int heard = 0;
    const SpokenFrames out = speak_frames(speaker, greedy, 10, [&](std::span<const int32_t>) { return ++heard > 0; });
    EXPECT_EQ(out.reason, StopReason::Eos);
    ASSERT_EQ(out.frames.count(), 1u);
    EXPECT_EQ(out.frames.main(0), config.eos);
    EXPECT_EQ(heard, 1);  // the listener hears the EOS frame too
    EXPECT_EQ(speaker.position(), before);  // but it is not fed
}

// Frames drawn with the next one's step issued ahead of their read-back are the frames drawn one
// at a time, EOS frames (which stop the step behind them) included: a model that draws EOS now and
// then at temperature 1, with drawing going on after each as a bench does.
TEST_F(Drama3Speaker, DrawingAheadGivesTheFramesDrawnOneAtATime) {
    const Config& config = model_->config();
    const Model model = testing::drama3_preferring_eos(1.2f);
    FrameSampling sampling;
    sampling.params = {1.0f, 30, 0.9f, 5};
    Speaker plain(model, *backend_, 64), ahead(model, *backend_, 64);
    plain.feed(prompt());
    ahead.feed(prompt());
    std::vector<int32_t> a(static_cast<size_t>(config.frame_width())), b(a.size());
    int ends = 0;
    for (int i = 0; i < 24; ++i) {
        SCOPED_TRACE(::testing::Message() << "frame " << i);
        const bool fed_plain = plain.step(sampling, a);
        const bool fed_ahead = ahead.step(sampling, b, nullptr, /*then_next=*/true);
        ASSERT_EQ(a, b);
        ASSERT_EQ(fed_plain, fed_ahead);
        ASSERT_EQ(plain.position(), ahead.position());
        ends += fed_plain ? 0 : 1;
        EXPECT_EQ(ahead.has_frame_ahead(), fed_ahead);
    }
    EXPECT_GT(ends, 0) << "no EOS drawn: the test does not cover the step queued behind one";
    EXPECT_LT(ends, 24);

    // With a frame ahead (after the next fed frame), rows are refused until step() has taken it, and
    // other settings too.
    bool fed = false;
    for (int i = 0; i < 8 && !fed; ++i) {
        fed = ahead.step(sampling, b, nullptr, true);
        plain.step(sampling, a);
        ASSERT_EQ(a, b);
    }
    ASSERT_TRUE(ahead.has_frame_ahead());
    const std::string message = error_of([&] { ahead.feed(rows(std::span(prompt_values_).first(11))); });
    EXPECT_NE(message.find("a frame was drawn ahead and not yet taken"), std::string::npos) << message;
    FrameSampling other = sampling;
    other.params.seed = 6;
    const std::string other_message = error_of([&] { ahead.step(other, b); });
    EXPECT_NE(other_message.find("other sampling settings"), std::string::npos) << other_message;
    ahead.step(sampling, b);
    plain.step(sampling, a);
    EXPECT_EQ(a, b);
    EXPECT_FALSE(ahead.has_frame_ahead());
}

TEST_F(Drama3Speaker, BadRowsAreNamed) {
    Speaker speaker(*model_, *backend_, 64);
    std::vector<int32_t> bad = prompt_values_;
    bad[6 * 11 + 3] = 32;  // row 6 is audio; codebook 2 holds 32 codes
    std::string message = error_of([&] { speaker.feed(rows(bad)); });
    EXPECT_NE(message.find("row 6 codebook 2 holds code 32"), std::string::npos) << message;
    bad = prompt_values_;
    bad[0] = 256;
    message = error_of([&] { speaker.feed(rows(bad)); });
    EXPECT_NE(message.find("row 0 has main token 256"), std::string::npos) << message;
    bad = prompt_values_;
    bad[6 * 11 + 1] = 3;  // main 211 is semantic code 11
    message = error_of([&] { speaker.feed(rows(bad)); });
    EXPECT_NE(message.find("code0 3, expected 11"), std::string::npos) << message;
    Speaker small(*model_, *backend_, 4);
    message = error_of([&] { small.feed(prompt()); });
    EXPECT_NE(message.find("do not fit the context"), std::string::npos) << message;
}

// A copy of the fixture directory whose config.json is changed by `edit`.
std::string edited_fixture(const testing::TempDir& dir, const std::function<void(std::string&)>& edit) {
    for (const char* name : {"config.json", "model.safetensors"}) {
        std::filesystem::copy_file(fixture_dir("drama3_tiny") + "/" + name, dir.file(name));
    }
    std::string config = testing::read_bytes(dir.file("config.json"));
    edit(config);
    testing::write_bytes(dir.file("config.json"), config);
    return dir.path();
}

void replace(std::string& s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    s.replace(at, from.size(), to);
}

TEST(Drama3Config, SemanticRangeOutsideTheVocabularyIsRefused) {
    testing::TempDir dir("drama3-config");
    const std::string path = edited_fixture(dir, [](std::string& c) {
        replace(c, "\"semantic_end_token_id\": 231", "\"semantic_end_token_id\": 300");
    });
    const std::string message = error_of([&] { Model::load(path); });
    EXPECT_NE(message.find("semantic tokens 200..300 do not fit the vocabulary of 256"), std::string::npos) << message;
}

TEST(Drama3Config, MoreSemanticTokensThanCodesAndAMissingTowerAreRefused) {
    testing::TempDir a("drama3-config-a"), b("drama3-config-b");
    std::string message = error_of([&] {
        Model::load(edited_fixture(a, [](std::string& c) { replace(c, "\"semantic_start_token_id\": 200", "\"semantic_start_token_id\": 190"); }));
    });
    EXPECT_NE(message.find("42 semantic tokens but the codebooks hold 32"), std::string::npos) << message;
    message = error_of([&] {
        Model::load(edited_fixture(b, [](std::string& c) { replace(c, "\"audio_decoder_config\"", "\"audio_config\""); }));
    });
    EXPECT_NE(message.find("missing audio_decoder_config"), std::string::npos) << message;
}

}  // namespace
}  // namespace duet::drama3
