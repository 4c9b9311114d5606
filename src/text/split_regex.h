// A pre-tokenizer Split with behaviour Isolated: every regex match and every gap
// between matches becomes its own piece, in order; empty pieces are dropped.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace duet::text {

class SplitRegex {
public:
    // `what` names the source (file and field) in compile errors.
    SplitRegex(const std::string& pattern, std::string_view what);
    ~SplitRegex();
    SplitRegex(SplitRegex&&) noexcept;
    SplitRegex& operator=(SplitRegex&&) noexcept;

    // Appends the pieces of `text` (valid UTF-8) to `out`; they point into `text`.
    void split(std::string_view text, std::vector<std::string_view>& out) const;

private:
    struct Compiled;
    std::unique_ptr<Compiled> compiled_;
};

}  // namespace duet::text
