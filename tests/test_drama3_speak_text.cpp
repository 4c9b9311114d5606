// Text to frames end to end on the tiny random Drama 3 with the built-in demo tokenizer: chunks
// spoken in one conversation, voice cloning, and the errors for text that cannot be spoken.
#include <memory>

#include "base/thread_pool.h"
#include "models/drama3/presets.h"
#include "models/drama3/random_weights.h"
#include "models/drama3/speak_text.h"
#include "test_support.h"
#include "text/demo_tokenizer.h"

namespace duet::drama3 {
namespace {

using testing::error_of;

class Drama3SpeakText : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const Config config = preset_config("tiny");
        tensors_ = make_random_weights(config, 5, nullptr);
        model_ = std::make_unique<Model>(Model::from_tensors(config, tensors_));
        tokenizer_ = text::Tokenizer::from_json(text::demo_tokenizer_json(static_cast<int32_t>(config.semantic_count())),
                                                "demo tokenizer");
    }
    static void TearDownTestSuite() {
        model_.reset();
        tokenizer_.reset();
        tensors_.reset();
    }

    SpokenFrames speak(std::string_view text, const SpeakOptions& options, const text::ReferenceVoice* voice = nullptr,
                       std::vector<size_t>* chunk_frames = nullptr, int64_t* position = nullptr) {
        Speaker speaker(*model_, *backend_, 2048);
        SpokenFrames out = speak_text(speaker, *tokenizer_, text, voice, options, {}, [&](size_t, size_t, size_t n) {
            if (chunk_frames) chunk_frames->push_back(n);
        });
        if (position) *position = speaker.position();
        return out;
    }

    static std::shared_ptr<TensorSet> tensors_;
    static std::unique_ptr<Model> model_;
    static std::unique_ptr<text::Tokenizer> tokenizer_;
    ThreadPool pool_{2};
    std::unique_ptr<Backend> backend_ = make_cpu_backend(&pool_);
};
std::shared_ptr<TensorSet> Drama3SpeakText::tensors_;
std::unique_ptr<Model> Drama3SpeakText::model_;
std::unique_ptr<text::Tokenizer> Drama3SpeakText::tokenizer_;

TEST_F(Drama3SpeakText, ParameterCountIsTheRandomWeightsSize) {
    EXPECT_EQ(tensors_->total_bytes(), random_weight_bytes(model_->config()));
}

TEST_F(Drama3SpeakText, FramesAreAudioRowsAndTheSeedReproducesThem) {
    SpeakOptions options;
    options.max_frames = 40;
    options.sampling.params.seed = 3;
    const SpokenFrames a = speak("Hello there.", options), b = speak("Hello there.", options);
    EXPECT_EQ(a.frames.values(), b.frames.values());
    ASSERT_GT(a.frames.count(), 0u);
    for (size_t r = 0; r < a.frames.count(); ++r) {
        EXPECT_TRUE(model_->is_audio_row(a.frames.row(r))) << "frame " << r;
        model_->check_frames(a.frames.row(r), "spoken frame");
    }
}

TEST_F(Drama3SpeakText, ChunksAreSpokenInOneConversation) {
    SpeakOptions options;
    options.max_frames = 400;
    options.chunk_bytes = 64;
    options.sampling.params.seed = 11;
    std::vector<size_t> per_chunk;
    int64_t position = 0;
    const std::string text =
        "The first sentence is long enough to fill a chunk alone. The second one follows it here. Third.";
    const SpokenFrames out = speak(text, options, nullptr, &per_chunk, &position);
    ASSERT_FALSE(per_chunk.empty());

    size_t total = 0;
    for (size_t n : per_chunk) total += n;
    EXPECT_EQ(total, out.frames.count());
    // With this seed every chunk ends with EOS, so both chunks are spoken.
    EXPECT_EQ(out.reason, StopReason::Eos);
    EXPECT_EQ(per_chunk.size(), 2u);
    // Every fed row is a prompt row or a spoken frame: the sequence is exactly as long as that.
    EXPECT_GE(position, static_cast<int64_t>(out.frames.count()));
}

TEST_F(Drama3SpeakText, VoiceCloningPromptIsSpoken) {
    const Config& c = model_->config();
    text::ReferenceVoice voice;
    voice.transcript = "This is how I sound.";
    voice.frames = 5;
    for (int64_t k = 0; k < c.tower.num_codebooks; ++k) {
        for (int f = 0; f < 5; ++f) voice.codes.push_back(static_cast<int32_t>((k * 7 + f * 3) % c.tower.codebook_size));
    }
    SpeakOptions options;
    options.max_frames = 8;
    const SpokenFrames out = speak("Say it like me.", options, &voice);
    EXPECT_GT(out.frames.count(), 0u);
    voice.codes[3] = static_cast<int32_t>(c.semantic_count());
    const std::string message = error_of([&] { speak("Say it like me.", options, &voice); });
    EXPECT_NE(message.find("codebook 0 frame 3"), std::string::npos) << message;
}

TEST_F(Drama3SpeakText, TextThatCannotBeSpokenIsRefused) {
    SpeakOptions options;
    EXPECT_NE(error_of([&] { speak("", options); }).find("empty"), std::string::npos);
    EXPECT_NE(error_of([&] { speak("<|speaker:1|>", options); }).find("speaker tags"), std::string::npos);
    const std::string message = error_of([&] { speak("<|im_end|><|voice|>", options); });
    EXPECT_NE(message.find("'<|im_end|>'"), std::string::npos) << message;
}

}  // namespace
}  // namespace duet::drama3
