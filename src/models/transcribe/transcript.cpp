#include "models/transcribe/transcript.h"

#include <cctype>

namespace duet::transcribe {

namespace {

constexpr std::string_view kLanguageTag = "<lang:";
constexpr std::string_view kSpeakerTag = "<spk:";

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

// The length of a `<spk:N>` tag at the start of `s`, and N; 0 when there is none.
size_t speaker_tag_at(std::string_view s, int& speaker) {
    if (!s.starts_with(kSpeakerTag)) return 0;
    size_t i = kSpeakerTag.size();
    int value = 0;
    const size_t digits_from = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && i - digits_from < 6) {
        value = value * 10 + (s[i] - '0');
        ++i;
    }
    if (i == digits_from || i >= s.size() || s[i] != '>') return 0;
    speaker = value;
    return i + 1;
}

// The length of a leading `<lang:CODE>` tag (after spaces), and CODE; 0 when there is none.
size_t language_tag_at(std::string_view s, std::string& code) {
    size_t i = 0;
    while (i < s.size() && is_space(s[i])) ++i;
    if (!s.substr(i).starts_with(kLanguageTag)) return 0;
    i += kLanguageTag.size();
    const size_t from = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' || s[i] == '_')) ++i;
    if (i == from || i >= s.size() || s[i] != '>') return 0;
    code = std::string(s.substr(from, i - from));
    return i + 1;
}

}  // namespace

std::optional<std::string> stated_language(std::string_view text) {
    std::string code;
    if (language_tag_at(text, code) == 0) return std::nullopt;
    return code;
}

std::vector<SpeakerSegment> speaker_segments(std::string_view text) {
    std::string code;
    text.remove_prefix(language_tag_at(text, code));
    std::vector<SpeakerSegment> segments;
    SpeakerSegment current;
    size_t from = 0;
    bool tagged = false;
    for (size_t i = 0; i < text.size(); ++i) {
        int speaker = 0;
        const size_t tag = speaker_tag_at(text.substr(i), speaker);
        if (tag == 0) continue;
        current.text = std::string(trim(text.substr(from, i - from)));
        if (current.speaker || !current.text.empty()) segments.push_back(current);
        current = {speaker, ""};
        tagged = true;
        i += tag - 1;
        from = i + 1;
    }
    if (!tagged) return {};
    current.text = std::string(trim(text.substr(from)));
    segments.push_back(current);
    return segments;
}

json::Value transcript_json(const std::string& file, const Transcription& t, double sample_rate) {
    json::Value out = json::Value::object();
    out.set("file", json::Value(file));
    out.set("text", json::Value(t.text));
    if (const std::optional<std::string> language = stated_language(t.text)) out.set("language", json::Value(*language));
    const std::vector<SpeakerSegment> segments = speaker_segments(t.text);
    if (!segments.empty()) {
        json::Value list = json::Value::array();
        for (const SpeakerSegment& s : segments) {
            json::Value segment = json::Value::object();
            segment.set("speaker", s.speaker ? json::Value(*s.speaker) : json::Value());
            segment.set("text", json::Value(s.text));
            list.push(segment);
        }
        out.set("segments", list);
    }
    out.set("audio_seconds", json::Value(static_cast<double>(t.samples) / sample_rate));
    out.set("audio_tokens", json::Value(t.audio_tokens));
    out.set("tokens", json::Value(static_cast<int64_t>(t.ids.size())));
    out.set("finished", json::Value(t.finished));
    json::Value timings = json::Value::object();
    timings.set("perception_s", json::Value(t.seconds.perception));
    timings.set("decode_s", json::Value(t.seconds.decode));
    timings.set("tokens_per_s", json::Value(t.seconds.tokens_per_second));
    timings.set("speculative", json::Value(t.speculative));
    if (t.speculative) timings.set("draft_acceptance", json::Value(t.draft_acceptance));
    out.set("timings", timings);
    return out;
}

}  // namespace duet::transcribe
