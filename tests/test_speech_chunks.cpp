// Long text split for speech: at sentence ends and speaker tags, under the byte budget,
// each chunk opening with the speaker tag in force.
#include <random>
#include <string>
#include <vector>

#include "test_support.h"
#include "text/speech_chunks.h"

namespace duet::text {
namespace {

using Chunks = std::vector<std::string>;

// The chunks put back together: what was said, by whom, in order.
std::string without_spaces(const std::string& s) {
    std::string out;
    for (const char c : s) {
        if (c != ' ' && c != '\n') out += c;
    }
    return out;
}

TEST(SpeechChunks, ShortTextIsOneChunk) {
    EXPECT_EQ(split_text_for_speech("  Hello there. How are you?  ", 64), (Chunks{"Hello there. How are you?"}));
}

TEST(SpeechChunks, SentencesArePackedUnderTheBudget) {
    const std::string text =
        "The first sentence is here. The second one follows it! Is this the third? Yes, and a fourth one ends it.";
    EXPECT_EQ(split_text_for_speech(text, 64),
              (Chunks{"The first sentence is here. The second one follows it!",
                      "Is this the third? Yes, and a fourth one ends it."}));
}

TEST(SpeechChunks, ClosingQuotesAndEllipsesStayWithTheirSentence) {
    const std::string text =
        "He said \"stop.\" Then nothing happened for a long while... And then, at last, it moved again for real.";
    EXPECT_EQ(split_text_for_speech(text, 64),
              (Chunks{"He said \"stop.\" Then nothing happened for a long while...",
                      "And then, at last, it moved again for real."}));
}

TEST(SpeechChunks, DecimalsAndAbbreviationsWithoutSpaceDoNotEndASentence) {
    const std::string text = "Pi is 3.14159 and e is 2.71828, both famous constants of mathematics. Next one here.";
    EXPECT_EQ(split_text_for_speech(text, 72),
              (Chunks{"Pi is 3.14159 and e is 2.71828, both famous constants of mathematics.", "Next one here."}));
}

TEST(SpeechChunks, CjkSentenceEndsNeedNoSpace) {
    // 。 ends a sentence without white space after it; 12 three-byte characters per sentence.
    const std::string a = "今天天气很好我们去公园吧。", b = "明天可能会下雨记得带伞。", c = "后天我们一起去看电影吧。";
    EXPECT_EQ(split_text_for_speech(a + b + c, 80), (Chunks{a + b, c}));
}

TEST(SpeechChunks, EveryChunkOpensWithTheSpeakerInForce) {
    const std::string text =
        "<|speaker:0|>Good morning, how did you sleep last night? I slept badly. "
        "<|speaker:1|>Not well at all, the storm kept me up. It was loud. <|speaker:0|>Oh.";
    EXPECT_EQ(split_text_for_speech(text, 64),
              (Chunks{"<|speaker:0|>Good morning, how did you sleep last night?",
                      "<|speaker:0|>I slept badly.",
                      "<|speaker:1|>Not well at all, the storm kept me up.",
                      "<|speaker:1|>It was loud. <|speaker:0|>Oh."}));
}

TEST(SpeechChunks, ShortTurnsShareAChunk) {
    EXPECT_EQ(split_text_for_speech("<|speaker:0|>Hi.<|speaker:1|>Hello!<|speaker:0|>Bye.", 64),
              (Chunks{"<|speaker:0|>Hi. <|speaker:1|>Hello! <|speaker:0|>Bye."}));
}

TEST(SpeechChunks, AnOverlongSentenceIsCutAtSpacesOrCharacterBoundaries) {
    std::string words;
    for (int i = 0; i < 40; ++i) words += "word" + std::to_string(i) + " ";
    for (const std::string& chunk : split_text_for_speech(words, 64)) {
        EXPECT_LE(chunk.size(), 64u);
        EXPECT_NE(chunk.back(), ' ');
        EXPECT_EQ(chunk.rfind("word", 0), 0u) << "cut inside a word: " << chunk;
    }
    std::string run;
    for (int i = 0; i < 100; ++i) run += "\xC3\xA9";  // é, two bytes, no spaces
    const Chunks chunks = split_text_for_speech(run, 64);
    std::string joined;
    for (const std::string& chunk : chunks) {
        EXPECT_LE(chunk.size(), 64u);
        EXPECT_EQ(chunk.size() % 2, 0u) << "a character was split";
        joined += chunk;
    }
    EXPECT_EQ(joined, run);
}

TEST(SpeechChunks, RandomTextKeepsEveryWordInOrderUnderTheBudget) {
    std::mt19937 rng(7);
    const std::vector<std::string> words = {"alpha", "beta.", "gamma!", "delta?", "épsilon", "zeta,", "\n",
                                            "<|speaker:2|>", "<|speaker:10|>", "eta...", "\"theta.\""};
    for (int trial = 0; trial < 50; ++trial) {
        std::string text;
        for (int i = 0; i < 200; ++i) text += words[rng() % words.size()] + (rng() % 3 ? " " : "");
        const size_t budget = 64 + rng() % 100;
        std::string joined;
        for (const std::string& chunk : split_text_for_speech(text, budget)) {
            EXPECT_LE(chunk.size(), budget);
            EXPECT_FALSE(chunk.empty());
            joined += chunk;
        }
        // Only white space and repeated speaker tags at chunk starts may differ.
        std::string expected_text = without_spaces(text), actual_text = without_spaces(joined);
        for (const std::string tag : {"<|speaker:2|>", "<|speaker:10|>"}) {
            for (std::string* s : {&expected_text, &actual_text}) {
                for (size_t p; (p = s->find(tag)) != std::string::npos;) s->erase(p, tag.size());
            }
        }
        EXPECT_EQ(actual_text, expected_text) << "trial " << trial;
    }
}

TEST(SpeechChunks, ATooSmallBudgetIsRefused) {
    EXPECT_NE(testing::error_of([] { split_text_for_speech("Hi.", 10); }).find("at least 64"), std::string::npos);
}

}  // namespace
}  // namespace duet::text
