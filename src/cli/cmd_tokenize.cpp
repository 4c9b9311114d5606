// duet tokenize: text to ids with a tokenizer.json, or ids back to text.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "base/error.h"
#include "cli/commands.h"
#include "text/tokenizer.h"

namespace duet::cli {

namespace {

const std::vector<std::string> kValued = {"--tokenizer", "--file", "--decode"};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    require(in.good(), path, ": cannot open");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "1,2 3" → {1, 2, 3}: commas and whitespace both separate.
std::vector<int32_t> parse_ids(std::string list) {
    for (char& c : list) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') c = ',';
    }
    std::string compact;
    for (char c : list) {
        if (c == ',' && (compact.empty() || compact.back() == ',')) continue;
        compact += c;
    }
    if (!compact.empty() && compact.back() == ',') compact.pop_back();
    if (compact.empty()) return {};
    return parse_id_list(compact, "--decode");
}

}  // namespace

int run_tokenize(const Argv& argv) {
    std::vector<std::string> texts;
    const Args args(split_positionals(argv, kValued, texts), kValued, {});
    if (texts.size() > 1) throw UsageError{"more than one TEXT argument (quote the text)"};
    const std::optional<std::string> positional =
        texts.empty() ? std::nullopt : std::optional<std::string>(texts.front());
    const std::string path = args.text("--tokenizer");
    const int inputs = (positional ? 1 : 0) + (args.has("--file") ? 1 : 0) + (args.has("--decode") ? 1 : 0);
    if (inputs != 1) throw UsageError{"give exactly one of TEXT, --file PATH or --decode IDS"};
    const std::unique_ptr<text::Tokenizer> tokenizer = text::Tokenizer::load(path);
    if (args.has("--decode")) {
        const std::string decoded = tokenizer->decode(parse_ids(args.text("--decode")));
        std::fwrite(decoded.data(), 1, decoded.size(), stdout);
        return 0;
    }
    const std::string input = positional ? *positional : read_file(args.text("--file"));
    std::printf("%s\n", join_ids(tokenizer->encode(input)).c_str());
    return 0;
}

}  // namespace duet::cli
