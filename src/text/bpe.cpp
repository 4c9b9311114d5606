#include "text/bpe.h"

#include <queue>

#include "base/error.h"

namespace duet::text {

Bpe::Bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
         bool ignore_merges, std::string_view what)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges) {
    merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [a, b] = merges[rank];
        const auto left = vocab_.find(a), right = vocab_.find(b), merged = vocab_.find(a + b);
        if (left == vocab_.end() || right == vocab_.end() || merged == vocab_.end()) {
            fail(what, ": merge ", rank, " ('", a, "' '", b, "') names a token missing from the vocabulary");
        }
        // The first occurrence of a pair wins, as in HF (earlier merges rank higher).
        merges_.emplace(pair_key(left->second, right->second),
                        Merge{static_cast<int32_t>(rank), merged->second});
    }
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges_) {
        if (auto it = vocab_.find(std::string(word)); it != vocab_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    // A doubly linked list of symbols; merging folds the right symbol into the left.
    struct Symbol {
        int32_t id;
        int32_t prev;
        int32_t next;
    };
    std::vector<Symbol> symbols;
    std::string one_char;
    for (size_t pos = 0; pos < word.size();) {
        size_t len = 1;
        while (pos + len < word.size() && (static_cast<unsigned char>(word[pos + len]) & 0xC0) == 0x80) ++len;
        one_char.assign(word.substr(pos, len));
        const auto it = vocab_.find(one_char);
        if (it == vocab_.end()) fail("tokenizer: character '", one_char, "' has no vocabulary entry");
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back({it->second, index - 1, index + 1});
        pos += len;
    }
    symbols.back().next = -1;

    // Candidates by (rank, position); stale ones are recognised on pop by their ids.
    struct Candidate {
        int32_t rank;
        int32_t left;
        int32_t left_id;
        int32_t right_id;
        int32_t result;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    auto push_pair = [&](int32_t left) {
        if (left < 0 || symbols[left].next < 0) return;
        const int32_t right = symbols[left].next;
        const auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
        if (it != merges_.end()) {
            queue.push({it->second.rank, left, symbols[left].id, symbols[right].id, it->second.result});
        }
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& left = symbols[c.left];
        if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;
        const int32_t right = left.next;
        left.id = c.result;
        left.next = symbols[right].next;
        if (left.next >= 0) symbols[left.next].prev = c.left;
        symbols[right].id = -1;  // removed: any candidate naming it is stale
        push_pair(left.prev);
        push_pair(c.left);
    }
    for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace duet::text
