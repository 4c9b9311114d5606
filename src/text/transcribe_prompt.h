// Nemotron 3.5 Transcribe's ChatML prompt: an empty system turn, a user turn whose
// instruction holds `<|audio|>` once per recording, and the assistant's start. Each
// `<|audio|>` is expanded to one placeholder position per audio token; the model
// overwrites those positions' embeddings with the projected audio rows, in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace duet::text {

struct AudioSpan {
    size_t begin = 0;  // the first placeholder's position in the prompt
    size_t count = 0;  // the recording's audio tokens
};

struct TranscribePrompt {
    std::vector<int32_t> ids;
    std::vector<AudioSpan> audio;  // one per recording, in prompt order
};

// The audio tokens the LM receives for `samples` samples at 16 kHz: one per 80 ms encoder frame.
size_t transcribe_audio_tokens(size_t samples);

// ASSUMED: the instruction when the user gives none.
std::string_view default_transcribe_instruction();

// ASSUMED: an instruction without `<|audio|>` gets the audio in front of it.
std::string place_audio_in_instruction(std::string_view instruction);

// `audio_tokens` holds each recording's token count; the instruction must name `<|audio|>` as
// many times (or not at all for one recording). With `thinking` off the assistant turn starts
// with an empty `<think></think>`, as the chat template writes it.
TranscribePrompt build_transcribe_prompt(const Tokenizer& tokenizer, std::string_view instruction,
                                         std::span<const size_t> audio_tokens, bool thinking = false);

}  // namespace duet::text
