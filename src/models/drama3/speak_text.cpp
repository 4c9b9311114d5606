#include "models/drama3/speak_text.h"

#include "base/error.h"
#include "text/speech_chunks.h"

namespace duet::drama3 {

SpokenFrames speak_text(Speaker& speaker, const text::Tokenizer& tokenizer, std::string_view text,
                        const text::ReferenceVoice* voice, const SpeakOptions& options,
                        const std::function<void(std::span<const int32_t>)>& on_frame,
                        const std::function<void(size_t, size_t, size_t)>& on_chunk) {
    const Config& c = speaker.model().config();
    text::check_speakable_text(tokenizer, text, "the text");
    const std::vector<std::string> chunks = text::split_text_for_speech(text, options.chunk_bytes);
    require(speaker.position() == 0, "drama3: speak_text starts a new conversation on a fresh sequence");

    text::Drama3Conversation conversation(tokenizer, c.vocabulary(), voice);
    SpokenFrames all{text::FrameRows(static_cast<int>(c.tower.num_codebooks)), StopReason::Eos};
    int64_t budget = options.max_frames;
    const auto listen = [&](std::span<const int32_t> frame) {
        if (on_frame && frame[0] != c.eos) on_frame(frame);
        return true;
    };
    for (size_t i = 0; i < chunks.size(); ++i) {
        if (budget <= 0) {
            all.reason = StopReason::FrameBudget;
            break;
        }
        conversation.add_user_turn(chunks[i]);
        // The conversation's rows map one to one onto the sequence's positions: feed what is new.
        const text::FrameRows& rows = conversation.rows();
        require(rows.count() - static_cast<size_t>(speaker.position()) <= static_cast<size_t>(speaker.room()),
                "drama3: chunk ", i + 1, " of ", chunks.size(), " does not fit the context (", speaker.room(),
                " of ", speaker.position() + speaker.room(), " rows left)");
        speaker.feed(rows.tail(static_cast<size_t>(speaker.position())));
        const SpokenFrames turn = speak_frames(speaker, options.sampling, budget, listen);
        const bool ended = turn.reason == StopReason::Eos;
        const text::FrameRows audio = ended ? turn.frames.head(turn.frames.count() - 1) : turn.frames;
        budget -= static_cast<int64_t>(turn.frames.count());
        all.frames.append(audio);
        all.reason = turn.reason;
        if (on_chunk) on_chunk(i, chunks.size(), audio.count());
        if (!ended) break;
        conversation.add_assistant_audio(audio);
    }
    return all;
}

}  // namespace duet::drama3
