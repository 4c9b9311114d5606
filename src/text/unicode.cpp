#include "text/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "base/error.h"

namespace duet::text {

namespace {

// The length of the well-formed UTF-8 sequence at byte i, or 0 when it is not one; `truncated` is set
// when a valid lead byte runs past the end.
size_t sequence_length(const unsigned char* s, size_t n, size_t i, bool& truncated) {
    truncated = false;
    const unsigned char c = s[i];
    if (c < 0x80) return 1;
    int extra = 0;
    char32_t cp = 0, min = 0;
    if (c >= 0xC2 && c <= 0xDF) {
        extra = 1, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        extra = 2, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        extra = 3, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n - i <= static_cast<size_t>(extra)) {
        truncated = true;
        return 0;
    }
    for (int k = 1; k <= extra; ++k) {
        if ((s[i + k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return static_cast<size_t>(extra) + 1;
}

}  // namespace

void validate_utf8(std::string_view text, std::string_view what) {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    for (size_t i = 0; i < text.size();) {
        bool truncated = false;
        const size_t length = sequence_length(s, text.size(), i, truncated);
        if (truncated) fail(what, ": truncated UTF-8 sequence at byte offset ", i);
        if (length == 0) fail(what, ": invalid UTF-8 at byte offset ", i);
        i += length;
    }
}

std::string replace_invalid_utf8(std::string_view text) {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        bool truncated = false;
        const size_t length = sequence_length(s, text.size(), i, truncated);
        if (length == 0) {
            out += "\xEF\xBF\xBD";  // U+FFFD
            ++i;
            continue;
        }
        out.append(text.substr(i, length));
        i += length;
    }
    return out;
}

std::string nfc(std::string_view text) {
    // ASCII is already in NFC; skipping utf8proc there avoids a copy for most text.
    bool ascii = true;
    for (char c : text) ascii &= static_cast<unsigned char>(c) < 0x80;
    if (ascii || text.empty()) return std::string(text);
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t len =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                     &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (len < 0) fail("NFC normalisation failed: ", utf8proc_errmsg(len));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
    return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(len));
}

namespace {

std::string encode_utf8(char32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the rest
// are moved, in order, to U+0100 onwards.
std::array<char32_t, 256> build_code_points() {
    std::array<char32_t, 256> cps{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        cps[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return cps;
}

const std::array<char32_t, 256>& code_points() {
    static const std::array<char32_t, 256> cps = build_code_points();
    return cps;
}

}  // namespace

const std::array<std::string, 256>& byte_to_unicode() {
    static const std::array<std::string, 256> table = [] {
        std::array<std::string, 256> t;
        for (int b = 0; b < 256; ++b) t[b] = encode_utf8(code_points()[b]);
        return t;
    }();
    return table;
}

int unicode_to_byte(char32_t code_point) {
    // Every mapped code point is below 256 + 68 (the count of moved bytes).
    static const std::array<int, 512> inverse = [] {
        std::array<int, 512> t;
        t.fill(-1);
        for (int b = 0; b < 256; ++b) t[code_points()[b]] = b;
        return t;
    }();
    return code_point < inverse.size() ? inverse[code_point] : -1;
}

char32_t next_code_point(std::string_view text, size_t& pos) {
    const auto c = static_cast<unsigned char>(text[pos]);
    int extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
    char32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1F) : extra == 2 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k <= extra && pos + k < text.size(); ++k) {
        cp = (cp << 6) | (static_cast<unsigned char>(text[pos + k]) & 0x3F);
    }
    pos += extra + 1;
    return cp;
}

}  // namespace duet::text
