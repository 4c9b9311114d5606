// Reading the parts of tokenizer.json: each function accepts exactly what the
// tokenizer implements and rejects the rest with an error naming the file.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/json.h"
#include "text/tokenizer.h"

namespace duet::text::config {

// True for NFC, false for none.
bool read_normalizer(const json::Value* normalizer, const std::string& path);
// The Split regexes in order (a bare or use_regex ByteLevel contributes GPT-2's pattern).
std::vector<std::string> read_pre_tokenizer(const json::Value* pre_tokenizer, const std::string& path);
void read_decoder(const json::Value* decoder, const std::string& path);

struct BpeModel {
    std::unordered_map<std::string, int32_t> vocab;
    std::vector<std::pair<std::string, std::string>> merges;
    bool ignore_merges = false;
};
BpeModel read_model(const json::Value* model, const std::string& path);
std::vector<AddedToken> read_added_tokens(const json::Value* added, const std::string& path);

}  // namespace duet::text::config
