// Reading the tags in a transcript the LLM wrote, and the JSON record `duet transcribe --format json`
// prints for one recording.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "models/transcribe/transcriber.h"

namespace duet::transcribe {

// The text one speaker said between two `<spk:N>` tags (or before the first, with no speaker).
struct SpeakerSegment {
    std::optional<int> speaker;
    std::string text;  // trimmed
};

// ASSUMED: the model states a language as a leading `<lang:CODE>` tag (CODE letters, digits, '-' or
// '_'), as NeMo's multilingual prompts do; nullopt when the text does not start with one.
std::optional<std::string> stated_language(std::string_view text);

// The text split at `<spk:N>` tags; empty when there are none. A leading language tag is dropped,
// and so is text before the first speaker tag when it is blank.
std::vector<SpeakerSegment> speaker_segments(std::string_view text);

// {"file", "text", "language" (when stated), "segments" (when speaker tags are present),
//  "audio_seconds", "audio_tokens", "tokens", "finished", "timings": {...}}.
json::Value transcript_json(const std::string& file, const Transcription& transcription, double sample_rate);

}  // namespace duet::transcribe
