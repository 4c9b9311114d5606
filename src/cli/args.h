// A small command-line parser: `duet COMMAND --flag value --switch`, each flag declared with help.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace duet::cli {

// Thrown for a malformed command line; the CLI prints it with the usage and exits with 2.
struct UsageError {
    std::string message;
};

class Args {
public:
    // `valued` flags take a value, `switches` do not; anything else is a usage error.
    Args(const std::vector<std::string>& argv, const std::vector<std::string>& valued,
         const std::vector<std::string>& switches);

    bool has(const std::string& flag) const { return values_.count(flag) > 0; }
    std::string text(const std::string& flag) const;  // required
    std::string text_or(const std::string& flag, const std::string& fallback) const;
    int64_t integer_or(const std::string& flag, int64_t fallback, int64_t min, int64_t max) const;
    double number_or(const std::string& flag, double fallback, double min, double max) const;

private:
    std::map<std::string, std::string> values_;
};

// Splits a command line into its flags (with the values of `valued` flags) and its positional
// arguments, since Args takes only flags. Anything starting with "--" (or a lone "-") stays a flag,
// for Args to accept or report.
std::vector<std::string> split_positionals(const std::vector<std::string>& argv, const std::vector<std::string>& valued,
                                           std::vector<std::string>& positionals);

// "1,2,3" → {1, 2, 3}; names the flag in errors.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag);

}  // namespace duet::cli
