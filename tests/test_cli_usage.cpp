// The binary's own flags: the usage on request (success, stdout; a command's part after a command),
// without a command or after a usage error (failure, stderr), and the version line.
#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

namespace duet {
namespace {

using testing::run_duet;

TEST(CliUsage, HelpPrintsTheUsageAndSucceeds) {
    for (const char* arguments : {"--help", "-h", "help"}) {
        const testing::CliResult r = run_duet(arguments);
        EXPECT_EQ(r.exit_code, 0) << arguments << ": " << r.err;
        EXPECT_EQ(r.out.rfind("usage: duet COMMAND", 0), 0u) << arguments;
        for (const char* command : {"generate", "speak", "transcribe", "codec", "bench"}) {
            EXPECT_NE(r.out.find(std::string("\n  ") + command + " "), std::string::npos) << command;
        }
        EXPECT_TRUE(r.err.empty()) << arguments << ": " << r.err;
    }
}

TEST(CliUsage, HelpAfterACommandPrintsThatCommandsPart) {
    for (const std::string command : {"bench", "speak", "transcribe"}) {
        for (const char* flag : {" --help", " --model nowhere -h"}) {
            const testing::CliResult r = run_duet(command + flag);
            EXPECT_EQ(r.exit_code, 0) << command << flag << ": " << r.err;
            EXPECT_EQ(r.out.rfind("usage: duet " + command + " [flags]\n  " + command + " ", 0), 0u) << r.out;
            EXPECT_NE(r.out.find("common flags:"), std::string::npos) << r.out;
            EXPECT_EQ(r.out.find("\n  generate "), std::string::npos) << command << ": another command's lines";
            EXPECT_TRUE(r.err.empty()) << command << flag << ": " << r.err;
        }
    }
}

TEST(CliUsage, AUsageErrorShowsTheCommandsPartAfterTheMessage) {
    const testing::CliResult r = run_duet("generate --bogus 1");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err.rfind("duet generate: unknown argument '--bogus'\n\nusage: duet generate [flags]\n", 0), 0u)
        << r.err;
    EXPECT_EQ(r.err.find("\n  speak "), std::string::npos) << r.err;
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
