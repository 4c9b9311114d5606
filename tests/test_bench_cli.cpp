// duet bench on the tiny presets: the sequence state's capacity (--ctx) is reported, defaults to the
// prompt and the decoded steps, and a capacity that cannot hold them is refused by name; the speech
// benchmark's draws are bounded, and its --speech frames reach the codec.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "base/json.h"
#include "cli/timed_draws.h"
#include "test_support.h"

namespace duet {
namespace {

using testing::run_duet;

constexpr const char* kSmall = " --preset tiny --random-weights --prompt 8 --decode 2 --threads 2 --bandwidth-mib 64";

int64_t capacity_of(const testing::CliResult& r) {
    const json::Value line = json::parse(r.out, "bench output");
    return line.find("capacity")->as_int("capacity");
}

TEST(BenchCli, CapacityDefaultsToThePromptAndTheSteps) {
    const testing::CliResult lm = run_duet(std::string("bench --arch nemotron_h") + kSmall);
    ASSERT_EQ(lm.exit_code, 0) << lm.err;
    EXPECT_EQ(capacity_of(lm), 10);
    const testing::CliResult speech = run_duet(std::string("bench --arch drama3") + kSmall);
    ASSERT_EQ(speech.exit_code, 0) << speech.err;
    EXPECT_EQ(capacity_of(speech), 11);  // a frame more: the last one fed
}

// --speech N streams N more frames through the codec into a WAV file: the capacity makes room for
// them, and the line gives their rate with the audio.
TEST(BenchCli, SpeechFramesGoThroughTheCodec) {
    const testing::CliResult r = run_duet(std::string("bench --arch drama3") + kSmall + " --speech 6");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json::Value line = json::parse(r.out, "bench output");
    EXPECT_EQ(capacity_of(r), 17);
    EXPECT_EQ(line.find("speech_frames")->as_int("speech_frames"), 6);
    EXPECT_GT(line.find("speech_frames_per_s")->as_number("speech_frames_per_s"), 0.0);
    EXPECT_GT(line.find("speech_real_time_factor")->as_number("speech_real_time_factor"), 0.0);
}

TEST(BenchCli, CtxSetsTheCapacity) {
    for (const char* arch : {"nemotron_h", "drama3"}) {
        const testing::CliResult r = run_duet(std::string("bench --arch ") + arch + kSmall + " --ctx 64");
        ASSERT_EQ(r.exit_code, 0) << arch << ": " << r.err;
        EXPECT_EQ(capacity_of(r), 64) << arch;
    }
}

TEST(BenchCli, CtxTooSmallForThePromptIsRefused) {
    const testing::CliResult r = run_duet(std::string("bench --arch nemotron_h") + kSmall + " --ctx 9");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--ctx is '9', expected an integer in [10, "), std::string::npos) << r.err;
}

TEST(BenchCli, AnUnknownArchitectureIsRefusedWithEveryBenchmarkNamed) {
    const testing::CliResult r = run_duet(std::string("bench --arch nope") + kSmall);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--arch is 'nope', expected one of nemotron_h, qwen35_moe, drama3, transcribe, fish_codec, "
                         "product_chain"),
              std::string::npos)
        << r.err;
}

// The speech benchmark times draws until enough frames are fed; draws that end the speech feed none
// and drawing goes on, but a model that only ever ends it is an error, not an endless loop.
TEST(BenchDraws, EndOfSpeechDrawsAreTimedAndDrawingGoesOn) {
    int calls = 0;
    const std::vector<double> seconds =
        cli::time_draws_until_fed(3, 20, [&] { return ++calls % 2 == 0; }, "test bench");
    EXPECT_EQ(seconds.size(), 6u);
    EXPECT_EQ(calls, 6);
}

TEST(BenchDraws, OnlyEndsOfSpeechAreRefusedAfterTheBound) {
    int calls = 0;
    try {
        cli::time_draws_until_fed(4, 12, [&] { return ++calls > 100; }, "test bench");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("test bench: 12 draws fed only 0 of 4 frames"), std::string::npos)
            << e.what();
    }
    EXPECT_EQ(calls, 12);
}

}  // namespace
}  // namespace duet
