// Transcribe's audio path against the transcribe_audio_tiny fixture (NeMo's mel, transformers'
// NemotronSpeechEncoder, NVIDIA's Sortformer head and fusion): every stage within the fixture's
// tolerances, speaker activity identical on the valid frames.
#include <gtest/gtest.h>

#include <cmath>

#include "base/thread_pool.h"
#include "io/safetensors.h"
#include "models/transcribe/perception.h"
#include "test_support.h"

namespace duet::transcribe {
namespace {

using duet::testing::fixture_dir;
using duet::testing::read_i32;
using duet::testing::relative_error;

class TranscribePerceptionFixture : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const std::string dir = fixture_dir("transcribe_audio_tiny");
        expected_ = new SafetensorsFile(SafetensorsFile::open(dir + "/expected.safetensors"));
        perception_ = new Perception(Perception::load(dir));
        ThreadPool pool(2);
        output_ = new PerceptionOutput(perception_->perceive(read_f32(*expected_->find("waveform")), &pool));
    }
    static void TearDownTestSuite() {
        delete output_;
        delete perception_;
        delete expected_;
    }
    static std::vector<float> expected(const std::string& name) { return read_f32(*expected_->find(name)); }
    static int64_t expected_int(const std::string& name) { return read_i32(*expected_->find(name))[0]; }
    // The error, also recorded in the test report so the agreement can be read off a run.
    static double error_of(const std::string& name, const std::vector<float>& actual) {
        const double error = relative_error(actual, expected(name));
        RecordProperty(name + "_relative_error", std::to_string(error));
        return error;
    }

    static SafetensorsFile* expected_;
    static Perception* perception_;
    static PerceptionOutput* output_;
};

SafetensorsFile* TranscribePerceptionFixture::expected_ = nullptr;
Perception* TranscribePerceptionFixture::perception_ = nullptr;
PerceptionOutput* TranscribePerceptionFixture::output_ = nullptr;

constexpr double kTolerance = 1e-3;  // relative to each tensor's max, as fixture.json gives it

TEST_F(TranscribePerceptionFixture, FrameCountsAndTokenFormula) {
    EXPECT_EQ(output_->mel_raw.valid, expected_int("mel_length"));
    EXPECT_EQ(output_->audio_tokens, expected_int("n_audio_tokens"));
    EXPECT_EQ(perception_->audio_tokens(static_cast<int64_t>(expected("waveform").size())),
              expected_int("n_audio_tokens"));
    EXPECT_EQ(output_->encoder_frames, 30);
    EXPECT_EQ(output_->windows, 1);
    EXPECT_EQ(output_->audio_embeddings().size(), static_cast<size_t>(expected_int("n_audio_tokens") * 48));
}

TEST_F(TranscribePerceptionFixture, LogMel) {
    const std::vector<float> raw = expected("mel_raw");
    ASSERT_EQ(output_->mel_raw.values.size(), raw.size());
    const double worst = testing::max_abs_difference(output_->mel_raw.values, raw);
    RecordProperty("mel_raw_max_abs_error", std::to_string(worst));
    EXPECT_LT(worst, 1e-3);
    EXPECT_LT(error_of("mel_normalized", output_->mel_normalized.values), kTolerance);
}

TEST_F(TranscribePerceptionFixture, AsrEncoder) {
    EXPECT_LT(error_of("asr_hidden", output_->asr_hidden), kTolerance);
}

TEST_F(TranscribePerceptionFixture, SortformerProbabilities) {
    EXPECT_LT(error_of("spk_probs_10ms", output_->spk_probs_10ms), kTolerance);
    EXPECT_LT(error_of("spk_probs", output_->spk_probs), kTolerance);
}

TEST_F(TranscribePerceptionFixture, SpeakerActivityIdenticalOnValidFrames) {
    const std::vector<float> active = expected("spk_active");
    ASSERT_EQ(output_->spk_active.size(), active.size());
    const int64_t speakers = perception_->config().sortformer.speakers;
    for (int64_t i = 0; i < output_->audio_tokens * speakers; ++i) {
        EXPECT_EQ(output_->spk_active[i], active[i]) << "frame " << i / speakers << " speaker " << i % speakers;
    }
}

TEST_F(TranscribePerceptionFixture, SpeakerKernel) {
    const PerceptionConfig& c = perception_->config();
    EXPECT_LT(relative_error(speaker_kernel(c.sortformer.speakers, c.asr.width, c.fusion), expected("speaker_kernel")),
              1e-6);
}

TEST_F(TranscribePerceptionFixture, FusedAndProjected) {
    EXPECT_LT(error_of("fused", output_->fused), kTolerance);
    EXPECT_LT(error_of("projected", output_->projected), kTolerance);
}

}  // namespace
}  // namespace duet::transcribe
