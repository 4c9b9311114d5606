#include "cli/args.h"

#include <algorithm>
#include <charconv>

namespace duet::cli {

namespace {

bool contains(const std::vector<std::string>& list, const std::string& s) {
    return std::find(list.begin(), list.end(), s) != list.end();
}

std::optional<int64_t> parse_int(const std::string& s) {
    int64_t value = 0;
    const char* end = s.data() + s.size();
    auto [ptr, ec] = std::from_chars(s.data(), end, value);
    if (ec != std::errc() || ptr != end || s.empty()) return std::nullopt;
    return value;
}

}  // namespace

Args::Args(const std::vector<std::string>& argv, const std::vector<std::string>& valued,
           const std::vector<std::string>& switches) {
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (contains(switches, a)) {
            values_[a] = "";
        } else if (contains(valued, a)) {
            if (i + 1 >= argv.size()) throw UsageError{a + " needs a value"};
            values_[a] = argv[++i];
        } else {
            throw UsageError{"unknown argument '" + a + "'"};
        }
    }
}

std::string Args::text(const std::string& flag) const {
    auto it = values_.find(flag);
    if (it == values_.end()) throw UsageError{"missing " + flag};
    return it->second;
}

std::string Args::text_or(const std::string& flag, const std::string& fallback) const {
    auto it = values_.find(flag);
    return it == values_.end() ? fallback : it->second;
}

int64_t Args::integer_or(const std::string& flag, int64_t fallback, int64_t min, int64_t max) const {
    auto it = values_.find(flag);
    if (it == values_.end()) return fallback;
    std::optional<int64_t> v = parse_int(it->second);
    if (!v || *v < min || *v > max) {
        throw UsageError{flag + " is '" + it->second + "', expected an integer in [" + std::to_string(min) + ", " +
                         std::to_string(max) + "]"};
    }
    return *v;
}

double Args::number_or(const std::string& flag, double fallback, double min, double max) const {
    auto it = values_.find(flag);
    if (it == values_.end()) return fallback;
    double value = 0.0;
    const std::string& s = it->second;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !(value >= min && value <= max)) {
        throw UsageError{flag + " is '" + s + "', expected a number in [" + std::to_string(min) + ", " +
                         std::to_string(max) + "]"};
    }
    return value;
}

std::vector<std::string> split_positionals(const std::vector<std::string>& argv, const std::vector<std::string>& valued,
                                           std::vector<std::string>& positionals) {
    std::vector<std::string> flags;
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (contains(valued, a) && i + 1 < argv.size()) {
            flags.push_back(a);
            flags.push_back(argv[++i]);
        } else if (a.rfind("--", 0) == 0 || a == "-") {
            flags.push_back(a);
        } else {
            positionals.push_back(a);
        }
    }
    return flags;
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag) {
    std::vector<int32_t> ids;
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        const std::string item = text.substr(start, comma - start);
        std::optional<int64_t> v = parse_int(item);
        if (!v || *v < 0 || *v > INT32_MAX) {
            throw UsageError{flag + ": '" + item + "' is not a token id (expected comma-separated integers >= 0)"};
        }
        ids.push_back(static_cast<int32_t>(*v));
        start = comma + 1;
    }
    return ids;
}

}  // namespace duet::cli
