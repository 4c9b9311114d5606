// Text to Drama 3 frames: the text split into chunks under a byte budget, each chunk a user turn of
// one conversation (a voice-cloning one when a reference voice is given), its frames drawn until EOS
// and kept as the assistant's turn, so the next chunk is spoken in the same voice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "models/drama3/speaker.h"
#include "text/drama3_prompt.h"
#include "text/tokenizer.h"

namespace duet::drama3 {

struct SpeakOptions {
    FrameSampling sampling;
    int64_t max_frames = 4000;  // over the whole text
    size_t chunk_bytes = 600;
};

// The audio frames (no EOS frames) of every chunk in order; `reason` is why the last chunk ended.
// `on_frame` sees each audio frame as it is drawn; `on_chunk` (chunk index, count, frames) each
// finished chunk.
SpokenFrames speak_text(Speaker& speaker, const text::Tokenizer& tokenizer, std::string_view text,
                        const text::ReferenceVoice* voice, const SpeakOptions& options,
                        const std::function<void(std::span<const int32_t>)>& on_frame = {},
                        const std::function<void(size_t, size_t, size_t)>& on_chunk = {});

}  // namespace duet::drama3
