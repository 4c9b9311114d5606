// Shared helpers for the test suites: where the fixtures are, how close is close enough.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "io/safetensors.h"

namespace duet::testing {

// The message of the duet::Error that `fn` throws; fails the test if it throws nothing.
template <typename Fn>
std::string error_of(Fn&& fn) {
    try {
        fn();
    } catch (const duet::Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected duet::Error";
    return "";
}

inline std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

inline std::string fixture_dir(const std::string& name) { return std::string(DUET_FIXTURES_DIR) + "/" + name; }

inline double abs_difference(double a, double b) { return std::fabs(a - b); }
inline double abs_difference(std::complex<double> a, std::complex<double> b) { return std::abs(a - b); }

// max |actual[i] - expected[i]| over n values; infinite when any value is NaN or infinite, since
// std::max would pass over a NaN (no fixture holds a value that is not finite).
template <typename Actual, typename Expected>
double max_abs_difference(const Actual* actual, const Expected* expected, size_t n) {
    double worst = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double d = abs_difference(actual[i], expected[i]);
        if (!std::isfinite(d)) return INFINITY;
        worst = std::max(worst, d);
    }
    return worst;
}

template <typename Actual, typename ActualAllocator, typename Expected, typename ExpectedAllocator>
double max_abs_difference(const std::vector<Actual, ActualAllocator>& actual,
                          const std::vector<Expected, ExpectedAllocator>& expected) {
    if (actual.size() != expected.size()) return INFINITY;
    return max_abs_difference(actual.data(), expected.data(), actual.size());
}

// The agreement measure of the fixtures, and of kernels against their references:
// max|actual - expected| / max|expected|, infinite as max_abs_difference is.
template <typename Expected>
double relative_error(const float* actual, const Expected* expected, size_t n) {
    const double max_diff = max_abs_difference(actual, expected, n);
    double max_ref = 0.0;
    for (size_t i = 0; i < n; ++i) max_ref = std::max(max_ref, std::fabs(static_cast<double>(expected[i])));
    return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

template <typename Expected>
double relative_error(const std::vector<float>& actual, const std::vector<Expected>& expected) {
    if (actual.size() != expected.size()) return INFINITY;
    return relative_error(actual.data(), expected.data(), actual.size());
}

// Ids and codes from fixtures: the library's reader, under the name the tests use.
using duet::read_i32;

// A fresh, empty directory under the system temp dir, removed by the destructor.
class TempDir {
public:
    explicit TempDir(const std::string& tag) {
        static int counter = 0;
        path_ = std::filesystem::temp_directory_path() /
                ("duet-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    std::string path() const { return path_.string(); }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

// What a run of the duet binary printed and how it exited.
struct CliResult {
    int exit_code = 0;
    std::string out, err;
};

// Runs `duet ARGUMENTS` (a shell-quoted string) and collects its output.
inline CliResult run_duet(const std::string& arguments) {
    TempDir tmp("cli");
    const std::string command =
        std::string(DUET_BINARY) + " " + arguments + " >" + tmp.file("out") + " 2>" + tmp.file("err");
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, read_bytes(tmp.file("out")), read_bytes(tmp.file("err"))};
}

}  // namespace duet::testing
