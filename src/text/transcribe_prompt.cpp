#include "text/transcribe_prompt.h"

#include "base/error.h"

namespace duet::text {

namespace {

constexpr std::string_view kAudioTag = "<|audio|>";

size_t count_occurrences(std::string_view text, std::string_view needle) {
    size_t count = 0;
    for (size_t pos = text.find(needle); pos != std::string_view::npos; pos = text.find(needle, pos + needle.size())) {
        ++count;
    }
    return count;
}

}  // namespace

size_t transcribe_audio_tokens(size_t samples) {
    constexpr size_t kHop = 160;             // 10 ms mel frames at 16 kHz
    constexpr size_t kFramesPerToken = 8;    // the encoders stack 8 mel frames: 80 ms
    const size_t mel_frames = samples / kHop;
    return (mel_frames + kFramesPerToken - 1) / kFramesPerToken;
}

std::string_view default_transcribe_instruction() { return "Transcribe the audio."; }

std::string place_audio_in_instruction(std::string_view instruction) {
    if (instruction.find(kAudioTag) != std::string_view::npos) return std::string(instruction);
    return str_cat(kAudioTag, instruction);
}

TranscribePrompt build_transcribe_prompt(const Tokenizer& tokenizer, std::string_view instruction,
                                         std::span<const size_t> audio_tokens, bool thinking) {
    const auto audio_id = tokenizer.token_id(kAudioTag);
    require(audio_id.has_value(), "the tokenizer has no ", kAudioTag, " token: expected a Transcribe tokenizer");
    require(!audio_tokens.empty(), "expected at least one recording to transcribe");
    for (size_t i = 0; i < audio_tokens.size(); ++i) {
        require(audio_tokens[i] > 0, "recording ", i + 1, " is shorter than one 80 ms audio token");
    }
    const std::string user = audio_tokens.size() == 1 ? place_audio_in_instruction(instruction) : std::string(instruction);
    const size_t tags = count_occurrences(user, kAudioTag);
    require(tags == audio_tokens.size(), "the instruction names ", kAudioTag, " ", tags, " times for ",
            audio_tokens.size(), " recordings");
    for (const int32_t id : tokenizer.encode(user)) {
        const AddedToken* added = tokenizer.added_token(id);
        require(added == nullptr || !added->special || id == *audio_id, "the instruction contains the structural token '",
                added ? added->content : std::string(), "': only ", kAudioTag, " may appear there");
    }

    const std::string text = str_cat("<|im_start|>system\n<|im_end|>\n<|im_start|>user\n", user,
                                     "<|im_end|>\n<|im_start|>assistant\n", thinking ? "" : "<think></think>");
    TranscribePrompt prompt;
    size_t next_audio = 0;
    for (const int32_t id : tokenizer.encode(text)) {
        if (id != *audio_id) {
            prompt.ids.push_back(id);
            continue;
        }
        const AudioSpan span{prompt.ids.size(), audio_tokens[next_audio++]};
        prompt.ids.insert(prompt.ids.end(), span.count, id);
        prompt.audio.push_back(span);
    }
    return prompt;
}

}  // namespace duet::text
