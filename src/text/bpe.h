// The BPE model: turns one pre-tokenized word (already in byte-level characters)
// into vocabulary ids by applying merges lowest rank first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace duet::text {

class Bpe {
public:
    Bpe() = default;
    // `merges` are pairs of token strings, highest priority first. `what` names the
    // file in errors (a merge naming a token missing from the vocabulary).
    Bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
        bool ignore_merges, std::string_view what);

    // Appends the ids of `word` to `out`. Throws when a character has no id, since
    // without an unknown token there is nothing faithful to emit.
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;

    const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

private:
    struct Merge {
        int32_t rank;
        int32_t result;
    };
    static uint64_t pair_key(int32_t left, int32_t right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }

    std::unordered_map<std::string, int32_t> vocab_;
    std::unordered_map<uint64_t, Merge> merges_;
    // Llama 3 style: a word that is itself in the vocabulary is emitted whole.
    bool ignore_merges_ = false;
};

}  // namespace duet::text
