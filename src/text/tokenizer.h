// A byte-level BPE tokenizer loaded from a HuggingFace tokenizer.json: the
// pipeline of Qwen, GPT-2 and Llama 3 style models. Only the configurations this
// engine implements are accepted; anything else is a load error, so that a
// tokenizer is never silently approximated.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/json.h"
#include "text/bpe.h"
#include "text/split_regex.h"

namespace duet::text {

// A token matched verbatim in the raw text before normalisation and splitting.
struct AddedToken {
    int32_t id = 0;
    std::string content;
    bool special = false;
};

class Tokenizer {
public:
    // Reads tokenizer.json; errors name the path and the unsupported setting.
    static std::unique_ptr<Tokenizer> load(const std::string& path);
    // The same from a parsed tokenizer.json; `source` names it in errors.
    static std::unique_ptr<Tokenizer> from_json(const json::Value& root, const std::string& source);

    // Text (UTF-8; invalid input is an error naming the byte offset) to ids. Thread-safe.
    std::vector<int32_t> encode(std::string_view text) const;
    // Ids to the exact bytes they stand for; an unknown id is an error naming it.
    std::string decode(std::span<const int32_t> ids) const;

    // One more than the largest id of the vocabulary or the added tokens.
    int32_t id_count() const { return static_cast<int32_t>(id_to_token_.size()); }
    std::optional<int32_t> token_id(std::string_view token) const;
    // The added token with this id, or nullptr when the id is an ordinary vocabulary token.
    const AddedToken* added_token(int32_t id) const;

private:
    Tokenizer() = default;
    void encode_segment(std::string_view segment, std::vector<int32_t>& out) const;
    void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
    void index_ids(const std::string& path);

    bool nfc_ = false;
    std::vector<SplitRegex> splits_;
    Bpe bpe_;
    std::vector<AddedToken> added_;
    // For each first byte, the added tokens starting with it, longest first.
    std::vector<std::vector<const AddedToken*>> added_by_first_byte_;
    std::vector<std::string> id_to_token_;
    std::vector<bool> id_is_added_;

    // Words repeat a lot in real text; their ids are remembered.
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace duet::text
