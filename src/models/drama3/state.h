// One Drama 3 sequence's state: the backbone's (delta-rule states, conv rings, attention caches)
// and a key/value cache per tower layer, all with the same capacity in rows. Tower cache rows are
// backbone positions.
#pragma once

#include <cstdint>
#include <vector>

#include "models/drama3/config.h"
#include "models/qwen35_moe/state.h"

namespace duet::drama3 {

class State {
public:
    State(const Config& config, Backend& backend, int64_t capacity);

    qwen35_moe::State& backbone() { return backbone_; }
    const qwen35_moe::State& backbone() const { return backbone_; }
    int64_t capacity() const { return backbone_.capacity(); }
    int64_t position() const { return backbone_.position(); }
    int64_t room() const { return backbone_.room(); }

    float* tower_keys(int64_t layer) { return tower_keys_[layer].data(); }
    float* tower_values(int64_t layer) { return tower_values_[layer].data(); }

private:
    qwen35_moe::State backbone_;
    std::vector<Buffer> tower_keys_, tower_values_;
};

}  // namespace duet::drama3
