// The binary's own flags: the usage on request (success, stdout), without a command (failure,
// stderr), and the version line.
#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

namespace duet {
namespace {

using testing::run_duet;

TEST(CliUsage, HelpAfterAnyCommandPrintsTheUsageAndSucceeds) {
    for (const char* arguments : {"--help", "-h", "help", "bench --help", "speak --model nowhere -h",
                                  "transcribe --help"}) {
        const testing::CliResult r = run_duet(arguments);
        EXPECT_EQ(r.exit_code, 0) << arguments << ": " << r.err;
        EXPECT_EQ(r.out.rfind("usage: duet COMMAND", 0), 0u) << arguments;
        EXPECT_TRUE(r.err.empty()) << arguments << ": " << r.err;
    }
}

TEST(CliUsage, NoCommandPrintsTheUsageAsAnError) {
    const testing::CliResult r = run_duet("");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(r.out.empty());
    EXPECT_EQ(r.err.rfind("usage: duet COMMAND", 0), 0u) << r.err;
}

TEST(CliUsage, AnUnknownCommandIsNamed) {
    const testing::CliResult r = run_duet("sing --model x");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("duet sing: unknown command 'sing'"), std::string::npos) << r.err;
}

TEST(CliUsage, VersionNamesTheBuild) {
    for (const char* arguments : {"--version", "version"}) {
        const testing::CliResult r = run_duet(arguments);
        EXPECT_EQ(r.exit_code, 0) << arguments << ": " << r.err;
        EXPECT_EQ(r.out.rfind(std::string("duet ") + DUET_VERSION + " (CPU kernels: ", 0), 0u) << r.out;
        EXPECT_NE(r.out.find("CUDA backend: "), std::string::npos) << r.out;
    }
}

}  // namespace
}  // namespace duet
