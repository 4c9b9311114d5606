#include "text/tokenizer.h"

#include <algorithm>

#include "base/error.h"
#include "base/json.h"
#include "text/tokenizer_config.h"
#include "text/unicode.h"

namespace duet::text {

namespace {

// Past this many distinct words the cache is dropped rather than grown without bound.
constexpr size_t kCacheLimit = 1 << 16;

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
    return from_json(json::parse_file(path), path);
}

std::unique_ptr<Tokenizer> Tokenizer::from_json(const json::Value& root, const std::string& path) {
    require(root.is_object(), path, ": expected a JSON object");
    std::unique_ptr<Tokenizer> tok(new Tokenizer());
    tok->nfc_ = config::read_normalizer(root.find("normalizer"), path);
    for (const std::string& pattern : config::read_pre_tokenizer(root.find("pre_tokenizer"), path)) {
        tok->splits_.emplace_back(pattern, path + ": pre_tokenizer");
    }
    config::read_decoder(root.find("decoder"), path);
    config::BpeModel model = config::read_model(root.find("model"), path);
    tok->bpe_ = Bpe(std::move(model.vocab), model.merges, model.ignore_merges, path);
    tok->added_ = config::read_added_tokens(root.find("added_tokens"), path);
    tok->index_ids(path);
    return tok;
}

void Tokenizer::index_ids(const std::string& path) {
    int32_t count = 0;
    for (const auto& [token, id] : bpe_.vocab()) count = std::max(count, id + 1);
    for (const AddedToken& t : added_) count = std::max(count, t.id + 1);
    id_to_token_.assign(count, std::string());
    id_is_added_.assign(count, false);
    std::vector<bool> seen(count, false);
    for (const auto& [token, id] : bpe_.vocab()) {
        require(!seen[id], path, ": id ", id, " is used by two vocabulary tokens");
        seen[id] = true;
        id_to_token_[id] = token;
    }
    // An added token may repeat a vocabulary entry (same id); its content is what decodes.
    for (const AddedToken& t : added_) {
        id_to_token_[t.id] = t.content;
        id_is_added_[t.id] = true;
        seen[t.id] = true;
    }
    added_by_first_byte_.assign(256, {});
    for (const AddedToken& t : added_) {
        added_by_first_byte_[static_cast<unsigned char>(t.content[0])].push_back(&t);
    }
    for (auto& list : added_by_first_byte_) {
        std::stable_sort(list.begin(), list.end(), [](const AddedToken* a, const AddedToken* b) {
            return a->content.size() > b->content.size();
        });
    }
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
    for (const AddedToken& t : added_) {
        if (t.content == token) return t.id;
    }
    const auto it = bpe_.vocab().find(std::string(token));
    if (it == bpe_.vocab().end()) return std::nullopt;
    return it->second;
}

const AddedToken* Tokenizer::added_token(int32_t id) const {
    if (id < 0 || id >= id_count() || !id_is_added_[id]) return nullptr;
    for (const AddedToken& t : added_) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
    validate_utf8(text, "tokenizer input");
    std::vector<int32_t> ids;
    // Added tokens are found first, in the raw text, leftmost and then longest, so
    // that they are never broken up by normalisation or the split regex.
    size_t segment_start = 0;
    for (size_t pos = 0; pos < text.size();) {
        const AddedToken* found = nullptr;
        for (const AddedToken* t : added_by_first_byte_[static_cast<unsigned char>(text[pos])]) {
            if (text.compare(pos, t->content.size(), t->content) == 0) {
                found = t;
                break;
            }
        }
        if (found == nullptr) {
            ++pos;
            continue;
        }
        encode_segment(text.substr(segment_start, pos - segment_start), ids);
        ids.push_back(found->id);
        pos += found->content.size();
        segment_start = pos;
    }
    encode_segment(text.substr(segment_start), ids);
    return ids;
}

void Tokenizer::encode_segment(std::string_view segment, std::vector<int32_t>& out) const {
    if (segment.empty()) return;
    const std::string normalized = nfc_ ? nfc(segment) : std::string(segment);
    std::vector<std::string_view> pieces{normalized};
    std::vector<std::string_view> next;
    for (const SplitRegex& split : splits_) {
        next.clear();
        for (std::string_view piece : pieces) split.split(piece, next);
        pieces.swap(next);
    }
    for (std::string_view piece : pieces) encode_piece(piece, out);
}

void Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    const std::string key(piece);
    {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        if (const auto it = cache_.find(key); it != cache_.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::string mapped;
    mapped.reserve(piece.size() * 2);
    for (char c : piece) mapped += byte_to_unicode()[static_cast<unsigned char>(c)];
    std::vector<int32_t> ids;
    bpe_.encode_word(mapped, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheLimit) cache_.clear();
    cache_.emplace(key, std::move(ids));
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
    std::string bytes;
    for (const int32_t id : ids) {
        require(id >= 0 && id < id_count() && (id_is_added_[id] || !id_to_token_[id].empty()), "token id ", id,
                " is out of range (the tokenizer has ids 0..", id_count() - 1, ")");
        const std::string& token = id_to_token_[id];
        if (id_is_added_[id]) {
            bytes += token;
            continue;
        }
        for (size_t pos = 0; pos < token.size();) {
            const size_t start = pos;
            const int byte = unicode_to_byte(next_code_point(token, pos));
            // A character outside the byte map is kept as its own UTF-8, as HF does.
            if (byte >= 0) {
                bytes += static_cast<char>(byte);
            } else {
                bytes.append(token, start, pos - start);
            }
        }
    }
    return bytes;
}

}  // namespace duet::text
