// Rows of a frame-based speech model's input: each row is [main token, code0, …,
// code(n-1)]. A text row carries a text token and zero codes; an audio row carries
// a semantic token and the frame's codec codes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace duet::text {

class FrameRows {
public:
    explicit FrameRows(int num_codebooks) : width_(1 + num_codebooks) {}

    int width() const { return width_; }
    int num_codebooks() const { return width_ - 1; }
    size_t count() const { return values_.size() / width_; }
    bool empty() const { return values_.empty(); }

    std::span<const int32_t> row(size_t r) const { return {values_.data() + r * width_, size_t(width_)}; }
    int32_t main(size_t r) const { return values_[r * width_]; }
    // Row-major [count, width], as a checkpoint or a dump stores it.
    const std::vector<int32_t>& values() const { return values_; }

    void push_text(int32_t token) {
        values_.push_back(token);
        values_.insert(values_.end(), width_ - 1, 0);
    }
    void push_text(std::span<const int32_t> tokens) {
        for (const int32_t t : tokens) push_text(t);
    }
    // `row` holds width() values: the main token then every codebook's code.
    void push_row(std::span<const int32_t> row) { values_.insert(values_.end(), row.begin(), row.end()); }
    // The first n rows (all of them when there are fewer) as rows of their own.
    FrameRows head(size_t n) const {
        FrameRows out(width_ - 1);
        n = std::min(n, count());
        out.values_.assign(values_.begin(), values_.begin() + static_cast<std::ptrdiff_t>(n * width_));
        return out;
    }
    // Rows [from, count()) as rows of their own.
    FrameRows tail(size_t from) const {
        FrameRows out(width_ - 1);
        out.values_.assign(values_.begin() + static_cast<std::ptrdiff_t>(from * width_), values_.end());
        return out;
    }
    void append(const FrameRows& other) { values_.insert(values_.end(), other.values_.begin(), other.values_.end()); }

private:
    int width_;
    std::vector<int32_t> values_;
};

}  // namespace duet::text
