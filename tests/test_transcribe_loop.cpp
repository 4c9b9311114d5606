// The transcription loop end to end on a tiny random Transcribe model (the fixture's perception, a
// random Nemotron-H of the projector's width with its MTP module, the fixture tokenizer): the audio
// rows over the placeholders, speculative and plain decoding agreeing, `duet transcribe` in both
// formats, and the errors for bad models and bad audio.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "backend/backend.h"
#include "base/half.h"
#include "base/json.h"
#include "base/thread_pool.h"
#include "io/audio_file.h"
#include "models/nemotron_h/random_weights.h"
#include "models/transcribe/tiny_model.h"
#include "models/transcribe/transcriber.h"
#include "models/transcribe/transcript.h"
#include "test_support.h"
#include "text/unicode.h"

namespace duet::transcribe {
namespace {

using duet::testing::error_of;
using duet::testing::fixture_dir;
using duet::testing::run_duet;
using duet::testing::TempDir;

const std::string kPerceptionDir = fixture_dir("transcribe_audio_tiny");
const std::string kTokenizer = fixture_dir("tokenizer_qwen2_pattern/tokenizer.json");

// Three seconds of a gliding tone with a little noise: enough audio tokens to matter, quick to run.
std::vector<float> test_tone(double seconds) {
    std::vector<float> wave(static_cast<size_t>(seconds * 16000));
    uint32_t noise = 12345;
    double phase = 0.0;
    for (size_t i = 0; i < wave.size(); ++i) {
        const double t = static_cast<double>(i) / 16000.0;
        phase += 2.0 * M_PI * (220.0 + 80.0 * t) / 16000.0;
        noise = noise * 1664525u + 1013904223u;
        wave[i] = static_cast<float>(0.3 * std::sin(phase) + 0.02 * ((noise >> 8) / 16777216.0 - 0.5));
    }
    return wave;
}

class TranscribeLoop : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir("transcribe-loop");
        ThreadPool pool(2);
        write_tiny_transcribe_model(dir_->path(), kPerceptionDir, kTokenizer, 7, &pool);
        transcriber_ = new Transcriber(Transcriber::load(dir_->path()));
        wave_ = new std::vector<float>(test_tone(3.0));
        write_wav(dir_->file("tone.wav"), wave_->data(), wave_->size(), 16000, WavSampleFormat::Float32);
    }
    static void TearDownTestSuite() {
        delete wave_;
        delete transcriber_;
        delete dir_;
    }

    Transcription run(bool speculative, int64_t max_new) {
        TranscribeOptions options;
        options.speculative = speculative;
        options.max_new_tokens = max_new;
        return transcriber_->transcribe(*wave_, *backend_, &pool_, options);
    }

    static TempDir* dir_;
    static Transcriber* transcriber_;
    static std::vector<float>* wave_;
    ThreadPool pool_{2};
    std::unique_ptr<Backend> backend_ = make_cpu_backend(&pool_);
};

TempDir* TranscribeLoop::dir_ = nullptr;
Transcriber* TranscribeLoop::transcriber_ = nullptr;
std::vector<float>* TranscribeLoop::wave_ = nullptr;

TEST_F(TranscribeLoop, TheDirectoryLoadsWithItsDraftModule) {
    EXPECT_EQ(transcriber_->llm().layout(), "hub under llm.");
    EXPECT_TRUE(transcriber_->llm().has_draft());
    EXPECT_EQ(transcriber_->llm().config().hidden, transcriber_->perception().config().output_dim);
    EXPECT_EQ(transcriber_->llm().vocab(), transcriber_->tokenizer().id_count());
}

TEST_F(TranscribeLoop, PlaceholdersHoldTheRoundedProjectedRows) {
    const PreparedAudio audio = transcriber_->prepare(*wave_, "", &pool_);
    ASSERT_EQ(audio.prompt.audio.size(), 1u);
    const text::AudioSpan span = audio.prompt.audio[0];
    EXPECT_EQ(span.count, text::transcribe_audio_tokens(wave_->size()));
    EXPECT_EQ(span.count, 38u);  // ceil(floor(48000 / 160) / 8)
    const int32_t audio_id = *transcriber_->tokenizer().token_id("<|audio|>");
    EXPECT_EQ(std::count(audio.prompt.ids.begin(), audio.prompt.ids.end(), audio_id),
              static_cast<std::ptrdiff_t>(span.count));

    // The rows are the perception's projected rows, rounded to bf16.
    const PerceptionOutput perceived = transcriber_->perception().perceive(*wave_, &pool_);
    const std::span<const float> projected = perceived.audio_embeddings();
    ASSERT_EQ(audio.audio_rows.size(), projected.size());
    for (size_t i = 0; i < projected.size(); ++i) {
        ASSERT_EQ(audio.audio_rows[i], bf16_to_f32(f32_to_bf16(projected[i]))) << i;
    }

    // And they are what the LLM's first layer receives at the placeholder positions.
    const nemotron_h::Model& llm = transcriber_->llm();
    const int64_t hidden = llm.config().hidden;
    std::vector<float> inputs;
    const HiddenHook hook = [&](int64_t index, const float* rows, int64_t n) {
        if (index == 0) inputs.assign(rows, rows + n * hidden);
    };
    nemotron_h::State state = llm.new_state(*backend_, static_cast<int64_t>(audio.prompt.ids.size()));
    const std::vector<nemotron_h::EmbeddingPatch> patches = audio.patches(hidden);
    llm.forward(*backend_, state, audio.prompt.ids, false, hook, nullptr, patches);
    ASSERT_EQ(inputs.size(), audio.prompt.ids.size() * hidden);
    for (size_t i = 0; i < audio.audio_rows.size(); ++i) {
        ASSERT_EQ(inputs[span.begin * hidden + i], audio.audio_rows[i]) << i;
    }
    // The position before the audio keeps its token embedding.
    EXPECT_NE(std::vector<float>(inputs.begin() + (span.begin - 1) * hidden, inputs.begin() + span.begin * hidden),
              std::vector<float>(audio.audio_rows.begin(), audio.audio_rows.begin() + hidden));
}

TEST_F(TranscribeLoop, SpeculativeAndPlainGiveTheSameText) {
    const Transcription plain = run(false, 40);
    const Transcription drafted = run(true, 40);
    EXPECT_FALSE(plain.speculative);
    EXPECT_TRUE(drafted.speculative);
    ASSERT_FALSE(plain.ids.empty());
    EXPECT_EQ(drafted.ids, plain.ids);
    EXPECT_EQ(drafted.text, plain.text);
    EXPECT_EQ(plain.audio_tokens, 38);
    EXPECT_GT(plain.seconds.perception, 0.0);
    EXPECT_GT(plain.seconds.tokens_per_second, 0.0);
    // <|im_end|> ends the text and is not part of it.
    EXPECT_EQ(std::count(plain.ids.begin(), plain.ids.end(), transcriber_->end_id()), 0);
    EXPECT_EQ(plain.text, text::replace_invalid_utf8(transcriber_->tokenizer().decode(plain.ids)));
}

TEST_F(TranscribeLoop, CliTextMatchesTheLibrary) {
    const Transcription expected = run(true, 24);
    const std::string wav = dir_->file("tone.wav");
    const testing::CliResult r =
        run_duet("transcribe --threads 2 --max-tokens 24 --model " + dir_->path() + " " + wav);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected.text + "\n");

    const testing::CliResult plain =
        run_duet("transcribe --threads 2 --max-tokens 24 --no-speculative --model " + dir_->path() + " " + wav);
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(plain.out, r.out);

    // Several files share the model; each gets a header.
    const testing::CliResult two =
        run_duet("transcribe --threads 2 --max-tokens 24 --model " + dir_->path() + " " + wav + " " + wav);
    ASSERT_EQ(two.exit_code, 0) << two.err;
    const std::string one = "== " + wav + "\n" + expected.text + "\n";
    EXPECT_EQ(two.out, one + one);
}

TEST_F(TranscribeLoop, CliJsonCarriesTokensAndTimings) {
    const std::string wav = dir_->file("tone.wav");
    const testing::CliResult r =
        run_duet("transcribe --threads 2 --max-tokens 16 --format json --model " + dir_->path() + " " + wav);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json::Value line = json::parse(r.out, "transcribe output");
    EXPECT_EQ(line.find("file")->as_string("file"), wav);
    EXPECT_EQ(line.find("text")->as_string("text"), run(true, 16).text);
    EXPECT_EQ(line.find("audio_tokens")->as_int("audio_tokens"),
              static_cast<int64_t>(text::transcribe_audio_tokens(wave_->size())));
    EXPECT_DOUBLE_EQ(line.find("audio_seconds")->as_number("audio_seconds"), 3.0);
    const json::Value* timings = line.find("timings");
    ASSERT_NE(timings, nullptr);
    EXPECT_GT(timings->find("perception_s")->as_number("perception_s"), 0.0);
    EXPECT_GT(timings->find("decode_s")->as_number("decode_s"), 0.0);
    EXPECT_TRUE(timings->find("speculative")->as_bool("speculative"));
}

TEST_F(TranscribeLoop, WidthMismatchNamesBothSizes) {
    ThreadPool pool(2);
    const nemotron_h::Config wide = tiny_llm_config(64, transcriber_->tokenizer().id_count());
    nemotron_h::Model llm = nemotron_h::Model::from_tensors(wide, nemotron_h::make_random_weights(wide, 1, &pool));
    const std::string message = error_of([&] {
        Transcriber(Perception::load(kPerceptionDir), std::move(llm), text::Tokenizer::load(kTokenizer), "tiny");
    });
    EXPECT_NE(message.find("tiny: the perception's projector writes rows of width 48"), std::string::npos) << message;
    EXPECT_NE(message.find("the LLM's hidden size is 64"), std::string::npos) << message;
}

TEST_F(TranscribeLoop, EmptyAndTooShortAudioAreRefused) {
    TempDir tmp("transcribe-bad");
    write_wav(tmp.file("empty.wav"), nullptr, 0, 16000);
    const testing::CliResult empty = run_duet("transcribe --model " + dir_->path() + " " + tmp.file("empty.wav"));
    EXPECT_EQ(empty.exit_code, 1);
    EXPECT_NE(empty.err.find(tmp.file("empty.wav")), std::string::npos) << empty.err;
    EXPECT_EQ(std::count(empty.err.begin(), empty.err.end(), '\n'), 1) << empty.err;

    const std::vector<float> blip(100, 0.1f);
    write_wav(tmp.file("blip.wav"), blip.data(), blip.size(), 16000);
    const testing::CliResult shorter = run_duet("transcribe --model " + dir_->path() + " " + tmp.file("blip.wav"));
    EXPECT_EQ(shorter.exit_code, 1);
    EXPECT_NE(shorter.err.find(tmp.file("blip.wav") + ": the recording has 100 samples, shorter than one 80 ms"),
              std::string::npos)
        << shorter.err;
}

TEST_F(TranscribeLoop, MissingPartsOfTheDirectoryAreNamed) {
    const std::string wav = dir_->file("tone.wav");
    const testing::CliResult no_tokenizer = run_duet("transcribe --model " + kPerceptionDir + " " + wav);
    EXPECT_EQ(no_tokenizer.exit_code, 1);
    EXPECT_NE(no_tokenizer.err.find(kPerceptionDir + ": no tokenizer.json"), std::string::npos) << no_tokenizer.err;

    const testing::CliResult no_files = run_duet("transcribe --model " + dir_->path());
    EXPECT_EQ(no_files.exit_code, 2);
    EXPECT_NE(no_files.err.find("give at least one FILE"), std::string::npos) << no_files.err;
}

TEST_F(TranscribeLoop, DemoWritesATranscribableDirectory) {
    TempDir tmp("transcribe-demo");
    const testing::CliResult demo = run_duet("demo --transcribe --threads 2 --perception " + kPerceptionDir +
                                             " --tokenizer " + kTokenizer + " --dir " + tmp.file("tiny"));
    ASSERT_EQ(demo.exit_code, 0) << demo.err;
    const testing::CliResult r = run_duet("transcribe --threads 2 --max-tokens 8 --model " + tmp.file("tiny") + " " +
                                          dir_->file("tone.wav"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
}

TEST(Transcript, LanguageAndSpeakerSegments) {
    EXPECT_EQ(stated_language(" <lang:de> Hallo"), "de");
    EXPECT_EQ(stated_language("Hallo <lang:de>"), std::nullopt);
    EXPECT_EQ(stated_language("<lang:>x"), std::nullopt);
    EXPECT_TRUE(speaker_segments("no tags here").empty());

    const std::vector<SpeakerSegment> s = speaker_segments("<lang:en><spk:0> Hello there. <spk:12>Hi! <spk:x> ok");
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].speaker, 0);
    EXPECT_EQ(s[0].text, "Hello there.");
    EXPECT_EQ(s[1].speaker, 12);
    EXPECT_EQ(s[1].text, "Hi! <spk:x> ok");

    const std::vector<SpeakerSegment> lead = speaker_segments("um <spk:1> yes");
    ASSERT_EQ(lead.size(), 2u);
    EXPECT_EQ(lead[0].speaker, std::nullopt);
    EXPECT_EQ(lead[0].text, "um");
}

TEST(Transcript, JsonHasSegmentsOnlyWhenTagged) {
    Transcription t;
    t.text = "<lang:fr><spk:0>Bonjour.<spk:1>Salut.";
    t.samples = 32000;
    t.audio_tokens = 25;
    const json::Value tagged = transcript_json("a.wav", t, 16000.0);
    EXPECT_EQ(tagged.find("language")->as_string("language"), "fr");
    ASSERT_NE(tagged.find("segments"), nullptr);
    ASSERT_EQ(tagged.find("segments")->items().size(), 2u);
    EXPECT_EQ(tagged.find("segments")->items()[1].find("speaker")->as_int("speaker"), 1);
    EXPECT_EQ(tagged.find("segments")->items()[1].find("text")->as_string("text"), "Salut.");
    EXPECT_DOUBLE_EQ(tagged.find("audio_seconds")->as_number("audio_seconds"), 2.0);

    t.text = "Plain text.";
    const json::Value plain = transcript_json("a.wav", t, 16000.0);
    EXPECT_EQ(plain.find("language"), nullptr);
    EXPECT_EQ(plain.find("segments"), nullptr);
}

}  // namespace
}  // namespace duet::transcribe
