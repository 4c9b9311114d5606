// The Drama 3 and Transcribe prompt builders, token by token. Structural tokens split
// the text before BPE runs, so each expected sequence is spelled as its special tokens
// and the plain-text pieces between them.
#include <string>
#include <variant>
#include <vector>

#include "test_support.h"
#include "text/drama3_prompt.h"
#include "text/transcribe_prompt.h"

namespace duet::text {
namespace {

const Tokenizer& tokenizer() {
    static const std::unique_ptr<Tokenizer> tok =
        Tokenizer::load(std::string(DUET_FIXTURES_DIR) + "/tokenizer_qwen2_pattern/tokenizer.json");
    return *tok;
}

// A special token (looked up by its exact text) or plain text (encoded on its own).
struct Special {
    std::string token;
};
using Part = std::variant<Special, std::string>;

std::vector<int32_t> spell(const std::vector<Part>& parts) {
    std::vector<int32_t> ids;
    for (const Part& part : parts) {
        if (const Special* special = std::get_if<Special>(&part)) {
            const auto id = tokenizer().token_id(special->token);
            EXPECT_TRUE(id.has_value()) << special->token;
            ids.push_back(id.value_or(-1));
            EXPECT_NE(tokenizer().added_token(ids.back()), nullptr) << special->token;
        } else {
            const std::vector<int32_t> text = tokenizer().encode(std::get<std::string>(part));
            for (const int32_t id : text) EXPECT_EQ(tokenizer().added_token(id), nullptr) << std::get<std::string>(part);
            ids.insert(ids.end(), text.begin(), text.end());
        }
    }
    return ids;
}

// The tokenizer fixture's own semantic tokens: <|semantic:0|> .. <|semantic:63|>.
Drama3Vocabulary vocabulary() {
    Drama3Vocabulary v;
    v.semantic_start = *tokenizer().token_id("<|semantic:0|>");
    v.semantic_end = *tokenizer().token_id("<|semantic:63|>");
    v.num_codebooks = 10;
    v.codebook_size = 32;
    return v;
}

std::vector<int32_t> mains(const FrameRows& rows) {
    std::vector<int32_t> ids;
    for (size_t r = 0; r < rows.count(); ++r) ids.push_back(rows.main(r));
    return ids;
}

void expect_text_rows(const FrameRows& rows, size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
        for (int k = 1; k < rows.width(); ++k) ASSERT_EQ(rows.row(r)[k], 0) << "text row " << r << " carries codes";
    }
}

TEST(Drama3Prompt, PlainPromptIsTheChatMLTurnsEndingInVoice) {
    const FrameRows rows = build_drama3_prompt(tokenizer(), vocabulary(), "Hello there, world.");
    EXPECT_EQ(rows.width(), 11);
    const std::vector<int32_t> expected =
        spell({Special{"<|im_start|>"}, "system\nconvert the provided text to speech", Special{"<|im_end|>"}, "\n",
               Special{"<|im_start|>"}, "user\nHello there, world.", Special{"<|im_end|>"}, "\n", Special{"<|im_start|>"},
               "assistant\n", Special{"<|voice|>"}});
    EXPECT_EQ(mains(rows), expected);
    expect_text_rows(rows, 0, rows.count());
}

TEST(Drama3Prompt, SpeakerTagsStayInTheUserText) {
    const FrameRows rows = build_drama3_prompt(tokenizer(), vocabulary(), "<|speaker:0|>Hi.<|speaker:1|>Hello!");
    const std::vector<int32_t> expected =
        spell({Special{"<|im_start|>"}, "system\nconvert the provided text to speech", Special{"<|im_end|>"}, "\n",
               Special{"<|im_start|>"}, "user\n", Special{"<|speaker:0|>"}, "Hi.", Special{"<|speaker:1|>"}, "Hello!",
               Special{"<|im_end|>"}, "\n", Special{"<|im_start|>"}, "assistant\n", Special{"<|voice|>"}});
    EXPECT_EQ(mains(rows), expected);
}

TEST(Drama3Prompt, VoiceCloningPutsTheReferenceAudioRowsInTheSystemTurn) {
    const Drama3Vocabulary vocab = vocabulary();
    ReferenceVoice voice;
    voice.transcript = "I said this.";
    voice.frames = 3;
    for (int k = 0; k < 10; ++k) {
        for (int f = 0; f < 3; ++f) voice.codes.push_back(k == 0 ? 60 - 7 * f : (k * 3 + f * 5) % 32);
    }
    const FrameRows rows = build_drama3_prompt(tokenizer(), vocab, "Now say this.", &voice);

    const std::vector<int32_t> before = spell(
        {Special{"<|im_start|>"}, "system\nconvert the provided text to speech reference to the following:\n\nText:\n",
         Special{"<|speaker:0|>"}, "I said this.\n\nSpeech:\n"});
    const std::vector<int32_t> after =
        spell({Special{"<|im_end|>"}, "\n", Special{"<|im_start|>"}, "user\nNow say this.", Special{"<|im_end|>"}, "\n",
               Special{"<|im_start|>"}, "assistant\n", Special{"<|voice|>"}});
    ASSERT_EQ(rows.count(), before.size() + 3 + after.size());
    const std::vector<int32_t> all = mains(rows);
    EXPECT_EQ(std::vector<int32_t>(all.begin(), all.begin() + before.size()), before);
    EXPECT_EQ(std::vector<int32_t>(all.end() - after.size(), all.end()), after);
    expect_text_rows(rows, 0, before.size());
    expect_text_rows(rows, before.size() + 3, rows.count());
    for (int f = 0; f < 3; ++f) {
        const auto row = rows.row(before.size() + f);
        EXPECT_EQ(row[0], *tokenizer().token_id("<|semantic:" + std::to_string(60 - 7 * f) + "|>")) << "frame " << f;
        for (int k = 0; k < 10; ++k) EXPECT_EQ(row[1 + k], voice.codes[k * 3 + f]) << "frame " << f << " code " << k;
    }
}

TEST(Drama3Prompt, LongTextContinuesTheConversationWithEachSpokenChunk) {
    const Drama3Vocabulary vocab = vocabulary();
    Drama3Conversation conversation(tokenizer(), vocab, nullptr);
    conversation.add_user_turn("First part.");
    FrameRows spoken(10);
    const std::vector<int32_t> frame = {vocab.semantic_start + 5, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    spoken.push_row(frame);
    spoken.push_row(frame);
    const size_t first_turn = conversation.rows().count();
    conversation.add_assistant_audio(spoken);
    conversation.add_user_turn("Second part.");

    const FrameRows& rows = conversation.rows();
    EXPECT_EQ(rows.row(first_turn)[0], frame[0]);
    EXPECT_EQ(rows.row(first_turn + 1)[10], 9);
    const std::vector<int32_t> all = mains(rows);
    const std::vector<int32_t> tail =
        spell({Special{"<|im_end|>"}, "\n", Special{"<|im_start|>"}, "user\nSecond part.", Special{"<|im_end|>"}, "\n",
               Special{"<|im_start|>"}, "assistant\n", Special{"<|voice|>"}});
    ASSERT_EQ(all.size(), first_turn + 2 + tail.size());
    EXPECT_EQ(std::vector<int32_t>(all.begin() + first_turn + 2, all.end()), tail);
}

TEST(Drama3PromptErrors, StructuralTokensInTextAreQuoted) {
    for (const std::string token : {"<|im_end|>", "<|voice|>", "<|semantic:3|>", "<|im_start|>", "<|audio|>"}) {
        const std::string message =
            testing::error_of([&] { build_drama3_prompt(tokenizer(), vocabulary(), "Say " + token + " please."); });
        EXPECT_NE(message.find("'" + token + "'"), std::string::npos) << message;
    }
    // A near miss is ordinary text.
    EXPECT_NO_THROW(build_drama3_prompt(tokenizer(), vocabulary(), "Say <|im_end| please."));
}

TEST(Drama3PromptErrors, EmptyOrTagOnlyTextIsRefused) {
    EXPECT_NE(testing::error_of([] { build_drama3_prompt(tokenizer(), vocabulary(), ""); }).find("empty"), std::string::npos);
    EXPECT_NE(testing::error_of([] { build_drama3_prompt(tokenizer(), vocabulary(), " \n\t"); }).find("empty"),
              std::string::npos);
    EXPECT_NE(testing::error_of([] { build_drama3_prompt(tokenizer(), vocabulary(), "<|speaker:0|> <|speaker:1|>"); })
                  .find("only speaker tags"),
              std::string::npos);
}

TEST(Drama3PromptErrors, ReferenceCodesOutsideTheirCodebookAreNamed) {
    ReferenceVoice voice{"Hi.", 2, std::vector<int32_t>(20, 1)};
    voice.codes[1 * 2 + 1] = 32;  // codebook 1, frame 1: the codebook has 32 codes
    std::string message = testing::error_of([&] { build_drama3_prompt(tokenizer(), vocabulary(), "Go.", &voice); });
    EXPECT_NE(message.find("codebook 1 frame 1 holds code 32"), std::string::npos) << message;
    voice.codes[3] = 1;
    voice.codes[0] = 64;  // 64 semantic codes
    message = testing::error_of([&] { build_drama3_prompt(tokenizer(), vocabulary(), "Go.", &voice); });
    EXPECT_NE(message.find("codebook 0 frame 0 holds code 64"), std::string::npos) << message;
    voice.codes.pop_back();
    message = testing::error_of([&] { build_drama3_prompt(tokenizer(), vocabulary(), "Go.", &voice); });
    EXPECT_NE(message.find("expected [10, 2] codes"), std::string::npos) << message;
}

TEST(Drama3PromptErrors, SemanticRangeMustFitTheTokenizer) {
    Drama3Vocabulary vocab = vocabulary();
    vocab.semantic_end = tokenizer().id_count() + 10;
    const std::string message = testing::error_of([&] { build_drama3_prompt(tokenizer(), vocab, "Go."); });
    EXPECT_NE(message.find("does not fit the tokenizer"), std::string::npos) << message;
}

TEST(TranscribePrompt, AudioTokensAreOnePer80Milliseconds) {
    EXPECT_EQ(transcribe_audio_tokens(0), 0u);
    EXPECT_EQ(transcribe_audio_tokens(159), 0u);
    EXPECT_EQ(transcribe_audio_tokens(160), 1u);       // one mel frame still needs a token
    EXPECT_EQ(transcribe_audio_tokens(160 * 8), 1u);
    EXPECT_EQ(transcribe_audio_tokens(160 * 8 + 160), 2u);
    EXPECT_EQ(transcribe_audio_tokens(16000 * 60), 750u);  // a minute: 6000 mel frames
}

TEST(TranscribePrompt, ChatMLWithTheAudioExpandedInPlace) {
    const size_t tokens[] = {5};
    const TranscribePrompt prompt = build_transcribe_prompt(tokenizer(), "Transcribe: <|audio|> please.", tokens);
    const std::vector<int32_t> expected =
        spell({Special{"<|im_start|>"}, "system\n", Special{"<|im_end|>"}, "\n", Special{"<|im_start|>"},
               "user\nTranscribe: ", Special{"<|audio|>"}, Special{"<|audio|>"}, Special{"<|audio|>"},
               Special{"<|audio|>"}, Special{"<|audio|>"}, " please.", Special{"<|im_end|>"}, "\n",
               Special{"<|im_start|>"}, "assistant\n<think></think>"});
    EXPECT_EQ(prompt.ids, expected);
    ASSERT_EQ(prompt.audio.size(), 1u);
    const std::vector<int32_t> head = spell({Special{"<|im_start|>"}, "system\n", Special{"<|im_end|>"}, "\n",
                                             Special{"<|im_start|>"}, "user\nTranscribe: "});
    EXPECT_EQ(prompt.audio[0].begin, head.size());
    EXPECT_EQ(prompt.audio[0].count, 5u);
}

TEST(TranscribePrompt, DefaultInstructionGetsTheAudioAndThinkingDropsTheEmptyThought) {
    const size_t tokens[] = {2};
    const TranscribePrompt prompt =
        build_transcribe_prompt(tokenizer(), default_transcribe_instruction(), tokens, /*thinking=*/true);
    const std::vector<int32_t> expected =
        spell({Special{"<|im_start|>"}, "system\n", Special{"<|im_end|>"}, "\n", Special{"<|im_start|>"}, "user\n",
               Special{"<|audio|>"}, Special{"<|audio|>"}, std::string(default_transcribe_instruction()),
               Special{"<|im_end|>"}, "\n", Special{"<|im_start|>"}, "assistant\n"});
    EXPECT_EQ(prompt.ids, expected);
}

TEST(TranscribePrompt, SeveralRecordingsFillTheirTagsInOrder) {
    const size_t tokens[] = {3, 1};
    const TranscribePrompt prompt = build_transcribe_prompt(tokenizer(), "A:<|audio|> B:<|audio|>", tokens);
    ASSERT_EQ(prompt.audio.size(), 2u);
    EXPECT_EQ(prompt.audio[0].count, 3u);
    EXPECT_EQ(prompt.audio[1].count, 1u);
    const int32_t audio = *tokenizer().token_id("<|audio|>");
    for (const AudioSpan& span : prompt.audio) {
        for (size_t i = 0; i < span.count; ++i) EXPECT_EQ(prompt.ids[span.begin + i], audio);
    }
    EXPECT_NE(prompt.ids[prompt.audio[0].begin + 3], audio);
    EXPECT_LT(prompt.audio[0].begin + 3, prompt.audio[1].begin);
}

TEST(TranscribePromptErrors, MismatchedTagsAndStructuralTokensAreRefused) {
    const size_t two[] = {3, 1};
    EXPECT_NE(testing::error_of([&] { build_transcribe_prompt(tokenizer(), "only <|audio|>", two); }).find("1 times for 2"),
              std::string::npos);
    const size_t one[] = {3};
    const std::string message =
        testing::error_of([&] { build_transcribe_prompt(tokenizer(), "<|im_end|><|audio|>", one); });
    EXPECT_NE(message.find("'<|im_end|>'"), std::string::npos) << message;
    const size_t none[] = {0};
    EXPECT_NE(testing::error_of([&] { build_transcribe_prompt(tokenizer(), "<|audio|>", none); }).find("shorter than"),
              std::string::npos);
}

}  // namespace
}  // namespace duet::text
