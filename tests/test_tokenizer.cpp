// The byte-level BPE tokenizer against HuggingFace tokenizers' own output, and its
// refusal of input and configurations it does not handle.
#include <filesystem>
#include <string>
#include <vector>

#include "base/json.h"
#include "test_support.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace duet::text {
namespace {

const std::string kDir = std::string(DUET_FIXTURES_DIR) + "/tokenizer_qwen2_pattern";

const Tokenizer& qwen2_pattern() {
    static const std::unique_ptr<Tokenizer> tok = Tokenizer::load(kDir + "/tokenizer.json");
    return *tok;
}

TEST(TokenizerFixture, EveryCaseEncodesAndDecodesLikeHuggingFace) {
    const json::Value cases = json::parse_file(kDir + "/cases.json");
    const std::vector<json::Value>& items = cases.find("cases")->items();
    ASSERT_EQ(items.size(), 176u);
    for (size_t i = 0; i < items.size(); ++i) {
        const std::string& text = items[i].find("text")->as_string("text");
        std::vector<int32_t> expected;
        for (const json::Value& id : items[i].find("ids")->items()) {
            expected.push_back(static_cast<int32_t>(id.as_int("id")));
        }
        EXPECT_EQ(qwen2_pattern().encode(text), expected) << "case " << i;
        EXPECT_EQ(qwen2_pattern().decode(expected), items[i].find("decoded")->as_string("decoded")) << "case " << i;
    }
}

TEST(TokenizerFixture, AddedTokensMatchBeforeSplitting) {
    const int32_t im_start = *qwen2_pattern().token_id("<|im_start|>");
    const std::vector<int32_t> ids = qwen2_pattern().encode("a<|im_start|>b");
    ASSERT_EQ(ids.size(), 3u);
    EXPECT_EQ(ids[1], im_start);
    EXPECT_EQ(qwen2_pattern().decode(ids), "a<|im_start|>b");
}

TEST(TokenizerErrors, InvalidUtf8NamesTheOffset) {
    const std::string message = testing::error_of([] { qwen2_pattern().encode(std::string("ab\xC3(", 4)); });
    EXPECT_NE(message.find("byte offset 2"), std::string::npos) << message;
    const std::string overlong = testing::error_of([] { qwen2_pattern().encode(std::string("x\xC0\x80", 3)); });
    EXPECT_NE(overlong.find("byte offset 1"), std::string::npos) << overlong;
}

TEST(Unicode, ReplaceInvalidUtf8KeepsWellFormedText) {
    EXPECT_EQ(replace_invalid_utf8("h\xC3\xA9llo \xE8\xAF\xAD"), "h\xC3\xA9llo \xE8\xAF\xAD");
    // A stray continuation byte, a truncated sequence at the end, an overlong form.
    EXPECT_EQ(replace_invalid_utf8(std::string("a\x87" "b\xE8\xAF", 5)), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(replace_invalid_utf8(std::string("\xC0\x80", 2)), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TokenizerErrors, IdOutOfRangeIsNamed) {
    const int32_t bad = qwen2_pattern().id_count() + 7;
    const std::string message = testing::error_of([&] { qwen2_pattern().decode(std::vector<int32_t>{bad}); });
    EXPECT_NE(message.find(std::to_string(bad)), std::string::npos) << message;
}

TEST(TokenizerErrors, UnknownModelTypeIsALoadError) {
    const std::string path = (std::filesystem::temp_directory_path() / "duet_tokenizer_unknown_model.json").string();
    testing::write_bytes(path,
                         R"({"normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,)"
                         R"( "use_regex": false}, "decoder": {"type": "ByteLevel"},)"
                         R"( "model": {"type": "WordPiece", "vocab": {}}})");
    const std::string message = testing::error_of([&] { Tokenizer::load(path); });
    std::filesystem::remove(path);
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("WordPiece"), std::string::npos) << message;
}

TEST(TokenizerErrors, UnknownPreTokenizerIsALoadError) {
    const std::string path = (std::filesystem::temp_directory_path() / "duet_tokenizer_unknown_pre.json").string();
    testing::write_bytes(path,
                         R"({"pre_tokenizer": {"type": "Metaspace"}, "decoder": {"type": "ByteLevel"},)"
                         R"( "model": {"type": "BPE", "vocab": {}, "merges": []}})");
    const std::string message = testing::error_of([&] { Tokenizer::load(path); });
    std::filesystem::remove(path);
    EXPECT_NE(message.find("Metaspace"), std::string::npos) << message;
}

}  // namespace
}  // namespace duet::text
