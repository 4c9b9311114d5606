#include "text/drama3_prompt.h"

#include "base/error.h"

namespace duet::text {

namespace {

// The strings S2 Pro and Drama 3 are trained with.
constexpr std::string_view kPlainSystem = "convert the provided text to speech";
constexpr std::string_view kCloningSystem = "convert the provided text to speech reference to the following:\n\nText:\n";
constexpr std::string_view kReferenceSpeaker = "<|speaker:0|>";

bool is_blank(std::string_view text) {
    for (const char c : text) {
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') return false;
    }
    return true;
}

void check_vocabulary(const Tokenizer& tokenizer, const Drama3Vocabulary& vocab) {
    require(vocab.semantic_start >= 0 && vocab.semantic_end >= vocab.semantic_start &&
                vocab.semantic_end < tokenizer.id_count(),
            "semantic token range ", vocab.semantic_start, "..", vocab.semantic_end,
            " does not fit the tokenizer's ids 0..", tokenizer.id_count() - 1);
    require(vocab.num_codebooks >= 1 && vocab.codebook_size >= 1, "expected at least one codebook of at least one code, got ",
            vocab.num_codebooks, " codebooks of ", vocab.codebook_size);
}

void check_reference(const ReferenceVoice& voice, const Drama3Vocabulary& vocab) {
    require(voice.frames > 0, "reference audio codes: expected at least one frame");
    require(voice.codes.size() == size_t(vocab.num_codebooks) * size_t(voice.frames), "reference audio codes: expected [",
            vocab.num_codebooks, ", ", voice.frames, "] codes, got ", voice.codes.size(), " values");
    for (int k = 0; k < vocab.num_codebooks; ++k) {
        const int32_t limit = k == 0 ? vocab.semantic_count() : vocab.codebook_size;
        for (int f = 0; f < voice.frames; ++f) {
            const int32_t code = voice.codes[size_t(k) * voice.frames + f];
            require(code >= 0 && code < limit, "reference audio codes: codebook ", k, " frame ", f, " holds code ", code,
                    ", expected 0..", limit - 1);
        }
    }
}

}  // namespace

bool is_speaker_tag(std::string_view token) {
    constexpr std::string_view prefix = "<|speaker:", suffix = "|>";
    if (token.size() <= prefix.size() + suffix.size() || !token.starts_with(prefix) || !token.ends_with(suffix)) {
        return false;
    }
    for (const char c : token.substr(prefix.size(), token.size() - prefix.size() - suffix.size())) {
        if (c < '0' || c > '9') return false;
    }
    return true;
}

void check_speakable_text(const Tokenizer& tokenizer, std::string_view text, std::string_view what) {
    require(!is_blank(text), what, " is empty: expected words to speak");
    bool has_words = false;
    for (const int32_t id : tokenizer.encode(text)) {
        const AddedToken* added = tokenizer.added_token(id);
        if (added == nullptr || !added->special) {
            has_words = has_words || !is_blank(tokenizer.decode(std::span(&id, 1)));
            continue;
        }
        require(is_speaker_tag(added->content), what, " contains the structural token '", added->content,
                "': only speaker tags like <|speaker:0|> may appear in text to speak");
    }
    require(has_words, what, " holds only speaker tags: expected words to speak");
}

Drama3Conversation::Drama3Conversation(const Tokenizer& tokenizer, const Drama3Vocabulary& vocab,
                                       const ReferenceVoice* voice)
    : tokenizer_(tokenizer), vocab_(vocab), rows_(vocab.num_codebooks) {
    check_vocabulary(tokenizer, vocab);
    if (voice == nullptr) {
        push_text(str_cat("<|im_start|>system\n", kPlainSystem, "<|im_end|>\n"));
        return;
    }
    check_speakable_text(tokenizer, voice->transcript, "the reference text");
    check_reference(*voice, vocab);
    push_text(str_cat("<|im_start|>system\n", kCloningSystem, kReferenceSpeaker, voice->transcript, "\n\nSpeech:\n"));
    push_audio(*voice);
    push_text("<|im_end|>\n");
}

void Drama3Conversation::add_user_turn(std::string_view text) {
    check_speakable_text(tokenizer_, text, "the text");
    push_text(str_cat("<|im_start|>user\n", text, "<|im_end|>\n<|im_start|>assistant\n<|voice|>"));
}

void Drama3Conversation::add_assistant_audio(const FrameRows& frames) {
    require(frames.width() == rows_.width(), "assistant audio: expected frames of width ", rows_.width(), ", got ",
            frames.width());
    rows_.append(frames);
    push_text("<|im_end|>\n");
}

void Drama3Conversation::push_text(std::string_view text) { rows_.push_text(tokenizer_.encode(text)); }

void Drama3Conversation::push_audio(const ReferenceVoice& voice) {
    std::vector<int32_t> row(rows_.width());
    for (int f = 0; f < voice.frames; ++f) {
        for (int k = 0; k < vocab_.num_codebooks; ++k) row[1 + k] = voice.codes[size_t(k) * voice.frames + f];
        row[0] = vocab_.semantic_start + row[1];
        rows_.push_row(row);
    }
}

FrameRows build_drama3_prompt(const Tokenizer& tokenizer, const Drama3Vocabulary& vocab, std::string_view text,
                              const ReferenceVoice* voice) {
    Drama3Conversation conversation(tokenizer, vocab, voice);
    conversation.add_user_turn(text);
    return conversation.rows();
}

}  // namespace duet::text
