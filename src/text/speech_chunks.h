// Long text to speak is generated chunk by chunk. Chunks end at speaker tags and
// sentence ends and stay under a byte budget; each starts with the speaker tag in
// force, so a chunk that continues a speaker's turn is still spoken in that voice.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace duet::text {

// The smallest budget accepted: room for a speaker tag and some words.
constexpr size_t kMinChunkBytes = 64;

// Chunks of at most `max_bytes` bytes, white space trimmed at their ends. A sentence longer
// than the budget is cut at its last space (or, with none, at a character boundary).
std::vector<std::string> split_text_for_speech(std::string_view text, size_t max_bytes);

}  // namespace duet::text
