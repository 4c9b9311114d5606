// duet perceive (the checking form of Transcribe's audio path) and duet bench --arch transcribe, run
// as the binary.
#include <gtest/gtest.h>

#include "base/json.h"
#include "io/audio_file.h"
#include "io/safetensors.h"
#include "test_support.h"

namespace duet {
namespace {

using testing::fixture_dir;
using testing::relative_error;
using testing::run_duet;
using testing::TempDir;

const std::string kFixture = fixture_dir("transcribe_audio_tiny");

TEST(TranscribeCli, PerceiveDumpsTheFixturesStages) {
    TempDir tmp("perceive");
    const testing::CliResult r = run_duet("perceive --threads 2 --model " + kFixture + " --audio " + kFixture +
                                          "/expected.safetensors --out " + tmp.file("out.safetensors"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const SafetensorsFile got = SafetensorsFile::open(tmp.file("out.safetensors"));
    const SafetensorsFile expected = SafetensorsFile::open(kFixture + "/expected.safetensors");
    for (const char* name : {"mel_normalized", "asr_hidden", "spk_probs", "fused", "projected"}) {
        ASSERT_NE(got.find(name), nullptr) << name;
        EXPECT_EQ(got.find(name)->shape, expected.find(name)->shape) << name;
        EXPECT_LT(relative_error(read_f32(*got.find(name)), read_f32(*expected.find(name))), 1e-3) << name;
    }
    ASSERT_NE(got.find("mel_raw"), nullptr);
    const std::vector<float> mel = read_f32(*got.find("mel_raw")), mel_expected = read_f32(*expected.find("mel_raw"));
    ASSERT_EQ(mel.size(), mel_expected.size());
    for (size_t i = 0; i < mel.size(); ++i) ASSERT_NEAR(mel[i], mel_expected[i], 1e-3) << i;
    EXPECT_EQ(testing::read_i32(*got.find("n_audio_tokens")), testing::read_i32(*expected.find("n_audio_tokens")));
}

TEST(TranscribeCli, PerceiveReadsSoundFiles) {
    TempDir tmp("perceive-wav");
    const SafetensorsFile expected = SafetensorsFile::open(kFixture + "/expected.safetensors");
    const std::vector<float> wave = read_f32(*expected.find("waveform"));
    write_wav(tmp.file("in.wav"), wave.data(), wave.size(), 16000, WavSampleFormat::Float32);
    const testing::CliResult r = run_duet("perceive --threads 2 --model " + kFixture + " --audio " +
                                          tmp.file("in.wav") + " --out " + tmp.file("out.safetensors"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const SafetensorsFile got = SafetensorsFile::open(tmp.file("out.safetensors"));
    EXPECT_LT(relative_error(read_f32(*got.find("projected")), read_f32(*expected.find("projected"))), 1e-3);
}

TEST(TranscribeCli, PerceiveNamesAMissingWaveform) {
    TempDir tmp("perceive-bad");
    const float x = 1.0f;
    write_safetensors(tmp.file("audio.safetensors"), {{"samples", DType::F32, {1}, &x, sizeof x}});
    const testing::CliResult r = run_duet("perceive --model " + kFixture + " --audio " +
                                          tmp.file("audio.safetensors") + " --out " + tmp.file("out.safetensors"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("audio.safetensors: no tensor 'waveform'"), std::string::npos) << r.err;
}

TEST(TranscribeCli, BenchTinyPrintsEncoderSecondsPerMinute) {
    const testing::CliResult r =
        run_duet("bench --arch transcribe --preset tiny --random-weights --audio-seconds 5 --threads 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json::Value line = json::parse(r.out, "bench output");
    EXPECT_EQ(line.find("arch")->as_string("arch"), "transcribe");
    EXPECT_EQ(line.find("audio_tokens")->as_int("audio_tokens"), 63);
    EXPECT_GT(line.find("encoder_s_per_audio_minute")->as_number("encoder_s_per_audio_minute"), 0.0);
}

}  // namespace
}  // namespace duet
