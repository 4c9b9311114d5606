// duet bench on the tiny presets: the sequence state's capacity (--ctx) is reported, defaults to the
// prompt and the decoded steps, and a capacity that cannot hold them is refused by name.
#include <gtest/gtest.h>

#include <string>

#include "base/json.h"
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

}  // namespace
}  // namespace duet
