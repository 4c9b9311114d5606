#include "text/speech_chunks.h"

#include <utility>

#include "base/error.h"
#include "text/drama3_prompt.h"

namespace duet::text {

namespace {

// A sentence (or the part of one that fits) and the speaker tag in force for it.
struct Piece {
    std::string_view speaker;
    std::string_view text;
    bool starts_turn = false;  // the first piece after its speaker tag
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

// The length of the speaker tag at the start of `s`, or 0.
size_t speaker_tag_at(std::string_view s) {
    if (!s.starts_with("<|speaker:")) return 0;
    const size_t end = s.find("|>");
    if (end == std::string_view::npos) return 0;
    return is_speaker_tag(s.substr(0, end + 2)) ? end + 2 : 0;
}

// Sentence enders that need white space (or the end) after them, and ones that do not (CJK).
bool ends_sentence_before_space(std::string_view s, size_t pos, size_t& length) {
    for (const std::string_view mark : {".", "!", "?", "\xE2\x80\xA6" /* … */}) {
        if (s.substr(pos).starts_with(mark)) {
            length = mark.size();
            return true;
        }
    }
    return false;
}
bool ends_sentence_anywhere(std::string_view s, size_t pos, size_t& length) {
    for (const std::string_view mark : {"\xE3\x80\x82" /* 。 */, "\xEF\xBC\x81" /* ！ */, "\xEF\xBC\x9F" /* ？ */, "\n"}) {
        if (s.substr(pos).starts_with(mark)) {
            length = mark.size();
            return true;
        }
    }
    return false;
}
bool is_closing_mark(std::string_view s, size_t pos, size_t& length) {
    for (const std::string_view mark : {"\"", "'", ")", "\xE2\x80\x9D" /* ” */, "\xE2\x80\x99" /* ’ */, "\xC2\xBB" /* » */,
                                        "\xE3\x80\x8D" /* 」 */, "\xE3\x80\x8F" /* 』 */}) {
        if (s.substr(pos).starts_with(mark)) {
            length = mark.size();
            return true;
        }
    }
    return false;
}

// Splits one speaker's text into sentences, each keeping its end mark, closing quotes and white space.
std::vector<std::string_view> sentences(std::string_view text) {
    std::vector<std::string_view> out;
    size_t start = 0, pos = 0;
    while (pos < text.size()) {
        size_t length = 0;
        bool end = ends_sentence_anywhere(text, pos, length);
        if (!end && ends_sentence_before_space(text, pos, length)) {
            size_t after = pos + length, mark = 0;
            while (after < text.size() && (ends_sentence_before_space(text, after, mark) || is_closing_mark(text, after, mark))) {
                after += mark;
            }
            end = after == text.size() || is_space(text[after]);
            length = after - pos;
        }
        pos += end ? length : 1;
        if (!end) continue;
        while (pos < text.size() && is_space(text[pos])) ++pos;
        out.push_back(text.substr(start, pos - start));
        start = pos;
    }
    if (start < text.size()) out.push_back(text.substr(start));
    return out;
}

// Where to cut `s` so that the head has at most `limit` bytes: after the last space, else on
// a UTF-8 character boundary.
size_t cut_point(std::string_view s, size_t limit) {
    for (size_t i = limit; i > limit / 2; --i) {
        if (is_space(s[i - 1])) return i;
    }
    size_t i = limit;
    while (i > 1 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    return i;
}

std::vector<Piece> pieces(std::string_view text, size_t max_bytes) {
    std::vector<Piece> out;
    std::string_view speaker;
    bool starts_turn = false;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t next_tag = pos;
        while (next_tag < text.size() && speaker_tag_at(text.substr(next_tag)) == 0) ++next_tag;
        for (std::string_view sentence : sentences(text.substr(pos, next_tag - pos))) {
            if (trim(sentence).empty()) continue;
            const size_t room = max_bytes - speaker.size();
            while (sentence.size() > room) {
                const size_t cut = cut_point(sentence, room);
                out.push_back({speaker, sentence.substr(0, cut), std::exchange(starts_turn, false)});
                sentence.remove_prefix(cut);
            }
            out.push_back({speaker, sentence, std::exchange(starts_turn, false)});
        }
        if (next_tag == text.size()) break;
        const size_t tag_length = speaker_tag_at(text.substr(next_tag));
        speaker = text.substr(next_tag, tag_length);
        starts_turn = true;
        pos = next_tag + tag_length;
    }
    return out;
}

}  // namespace

std::vector<std::string> split_text_for_speech(std::string_view text, size_t max_bytes) {
    require(max_bytes >= kMinChunkBytes, "chunk budget of ", max_bytes, " bytes is too small: expected at least ",
            kMinChunkBytes);
    std::vector<std::string> chunks;
    std::string chunk;
    auto flush = [&] {
        const std::string_view trimmed = trim(chunk);
        if (!trimmed.empty() && trimmed.size() != speaker_tag_at(trimmed)) chunks.emplace_back(trimmed);
        chunk.clear();
    };
    for (const Piece& piece : pieces(text, max_bytes)) {
        if (!chunk.empty()) {
            // Inside a chunk only a new turn writes its tag, after a space if the previous turn left none.
            std::string addition;
            if (piece.starts_turn) addition = str_cat(is_space(chunk.back()) ? "" : " ", piece.speaker);
            addition += piece.text;
            if (chunk.size() + addition.size() <= max_bytes) {
                chunk += addition;
                continue;
            }
            flush();
        }
        chunk = str_cat(piece.speaker, piece.text);
    }
    flush();
    return chunks;
}

}  // namespace duet::text
