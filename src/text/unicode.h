// UTF-8 checks, NFC normalisation and the GPT-2 byte-to-character map that
// byte-level BPE tokenizers rely on.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace duet::text {

// Throws duet::Error naming `what` and the byte offset of the first invalid sequence
// (overlong forms, surrogates and code points above U+10FFFF are invalid too).
void validate_utf8(std::string_view text, std::string_view what);

// The text with each byte that starts no well-formed sequence replaced by U+FFFD.
std::string replace_invalid_utf8(std::string_view text);

// Unicode NFC of valid UTF-8.
std::string nfc(std::string_view text);

// Byte-level BPE spells every byte as one printable character so that merges never
// see raw control bytes or broken UTF-8: entry b is that character, UTF-8 encoded.
const std::array<std::string, 256>& byte_to_unicode();

// The inverse: the byte a code point stands for, or -1 when it is not in the map.
int unicode_to_byte(char32_t code_point);

// Decodes the code point at `pos` of valid UTF-8 and advances `pos` past it.
char32_t next_code_point(std::string_view text, size_t& pos);

}  // namespace duet::text
