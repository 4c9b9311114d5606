#include "text/demo_tokenizer.h"

#include <vector>

#include "base/error.h"
#include "text/unicode.h"

namespace duet::text {

namespace {

constexpr int32_t kByteTokens = 256;

std::vector<std::string> structural_tokens() {
    std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|voice|>", "<|text|>",
                                       "<|audio|>"};
    for (int s = 0; s < 4; ++s) tokens.push_back(str_cat("<|speaker:", s, "|>"));
    return tokens;
}

json::Value object(std::initializer_list<std::pair<const char*, json::Value>> fields) {
    json::Value v = json::Value::object();
    for (const auto& [key, value] : fields) v.set(key, value);
    return v;
}

}  // namespace

DemoVocabulary demo_vocabulary(int32_t semantic_count) {
    const int32_t structural = static_cast<int32_t>(structural_tokens().size());
    return {kByteTokens + 2, kByteTokens + structural, semantic_count, kByteTokens + structural + semantic_count};
}

json::Value demo_tokenizer_json(int32_t semantic_count) {
    json::Value vocab = json::Value::object();
    for (int b = 0; b < kByteTokens; ++b) vocab.set(byte_to_unicode()[b], json::Value(static_cast<int64_t>(b)));
    std::vector<std::string> added = structural_tokens();
    for (int32_t s = 0; s < semantic_count; ++s) added.push_back(str_cat("<|semantic:", s, "|>"));
    json::Value added_tokens = json::Value::array();
    for (size_t i = 0; i < added.size(); ++i) {
        added_tokens.push(object({{"id", json::Value(static_cast<int64_t>(kByteTokens + i))},
                                  {"content", json::Value(added[i])},
                                  {"special", json::Value(true)}}));
    }
    return object({{"normalizer", json::Value()},
                   {"pre_tokenizer", object({{"type", json::Value(std::string("ByteLevel"))},
                                             {"add_prefix_space", json::Value(false)},
                                             {"use_regex", json::Value(true)}})},
                   {"decoder", object({{"type", json::Value(std::string("ByteLevel"))}})},
                   {"model", object({{"type", json::Value(std::string("BPE"))},
                                     {"vocab", vocab},
                                     {"merges", json::Value::array()}})},
                   {"added_tokens", added_tokens}});
}

}  // namespace duet::text
