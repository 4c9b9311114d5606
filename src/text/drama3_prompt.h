// Drama 3's ChatML prompt as backbone input rows: the system turn (plain, or
// voice cloning with the reference transcript and the reference audio as audio
// rows), user turns, and assistant turns that start with `<|voice|>`. A long text
// is spoken as several user turns in one conversation, each finished turn's audio
// kept, so the voice carries over from chunk to chunk.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/frame_rows.h"
#include "text/tokenizer.h"

namespace duet::text {

// Where a Drama 3 checkpoint puts its audio in the token space (from its config).
struct Drama3Vocabulary {
    int32_t semantic_start = 0;  // the id of semantic code 0; the ids up to semantic_end are contiguous
    int32_t semantic_end = 0;
    int num_codebooks = 10;      // code0 (semantic) and the residual codebooks
    int codebook_size = 0;       // every residual code is below this
    int32_t semantic_count() const { return semantic_end - semantic_start + 1; }
};

// A voice to clone: what is said in the reference audio, and its codec codes
// [num_codebooks, frames] row-major (code0 first), as the codec's encoder gives them.
struct ReferenceVoice {
    std::string transcript;
    int frames = 0;
    std::vector<int32_t> codes;
};

class Drama3Conversation {
public:
    // Starts the conversation with its system turn; `voice` (may be null) selects voice cloning.
    Drama3Conversation(const Tokenizer& tokenizer, const Drama3Vocabulary& vocab, const ReferenceVoice* voice);

    // A user turn holding `text`, then the assistant's start: `<|im_start|>assistant\n<|voice|>`.
    // Text may carry speaker tags (`<|speaker:N|>`); any other structural token is an error quoting it.
    void add_user_turn(std::string_view text);
    // The frames the assistant spoke for the last user turn (without the EOS frame); closes its turn.
    void add_assistant_audio(const FrameRows& frames);

    const FrameRows& rows() const { return rows_; }

private:
    void push_text(std::string_view text);
    void push_audio(const ReferenceVoice& voice);

    const Tokenizer& tokenizer_;
    Drama3Vocabulary vocab_;
    FrameRows rows_;
};

// The whole prompt for one text: the system turn, one user turn, the assistant's start.
FrameRows build_drama3_prompt(const Tokenizer& tokenizer, const Drama3Vocabulary& vocab, std::string_view text,
                              const ReferenceVoice* voice = nullptr);

// Rejects text that cannot be spoken: empty, only speaker tags and white space, or holding a
// structural token other than a speaker tag (the error quotes it). `what` names the text.
void check_speakable_text(const Tokenizer& tokenizer, std::string_view text, std::string_view what);

// ASSUMED: the only structural tokens a user may type in text to speak are speaker tags.
bool is_speaker_tag(std::string_view token);

}  // namespace duet::text
