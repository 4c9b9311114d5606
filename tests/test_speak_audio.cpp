// `duet speak` to a WAV file: a tiny random Drama 3 (written as a checkpoint directory and loaded
// back) speaks through the tiny codec fixture, and the streamed WAV holds exactly the audio the
// codec makes of the same frames decoded whole.
#include <fstream>

#include "base/thread_pool.h"
#include "io/audio_file.h"
#include "models/drama3/config.h"
#include "models/drama3/presets.h"
#include "models/drama3/random_weights.h"
#include "models/fish_codec/codec.h"
#include "models/fish_codec/wav_stream.h"
#include "test_support.h"
#include "text/demo_tokenizer.h"

namespace duet {
namespace {

using testing::fixture_dir;
using testing::read_i32;

TEST(Drama3ConfigJson, RoundTripsThePresetAndTheFixture) {
    for (const drama3::Config& c :
         {drama3::preset_config("tiny"), drama3::load_config(fixture_dir("drama3_tiny") + "/config.json")}) {
        const json::Value written = drama3::config_to_json(c);
        EXPECT_EQ(json::dump(drama3::config_to_json(drama3::parse_config(written, "round trip"))), json::dump(written));
    }
}

// A directory `duet speak` can load: config.json, model.safetensors, tokenizer.json.
void write_tiny_speech_model(const std::string& dir) {
    const drama3::Config config = drama3::preset_config("tiny");
    drama3::make_random_weights(config, 3, nullptr)->write(dir + "/model.safetensors");
    std::ofstream(dir + "/config.json") << json::dump(drama3::config_to_json(config));
    std::ofstream(dir + "/tokenizer.json")
        << json::dump(text::demo_tokenizer_json(static_cast<int32_t>(config.semantic_count())));
}

TEST(SpeakAudio, TheStreamedWavIsTheWholeDecodeOfTheFrames) {
    testing::TempDir dir("speak-audio");
    write_tiny_speech_model(dir.path());
    const std::string common = "speak --model " + dir.path() + " --codec " + fixture_dir("fish_codec_tiny") +
                               " --text 'Hello there, how are you?' --seed 4 --max-frames 40 --threads 2 --out ";
    const testing::CliResult wav = testing::run_duet(common + dir.file("speech.wav"));
    ASSERT_EQ(wav.exit_code, 0) << wav.err;
    const testing::CliResult frames = testing::run_duet(common + dir.file("frames.safetensors"));
    ASSERT_EQ(frames.exit_code, 0) << frames.err;

    const Checkpoint written = Checkpoint::open(dir.file("frames.safetensors"));
    const std::vector<int32_t> codes = read_i32(written.get("codes"));
    const int64_t count = written.get("codes").shape[1];
    ASSERT_GT(count, 0);
    const fish_codec::FishCodec codec = fish_codec::FishCodec::load(fixture_dir("fish_codec_tiny"));
    const std::vector<float> whole = codec.decode(codes, count, nullptr);

    const AudioClip clip = read_audio_file(dir.file("speech.wav"));
    EXPECT_EQ(clip.sample_rate, 44100);
    EXPECT_EQ(clip.channels, 1);
    ASSERT_EQ(clip.samples.size(), whole.size());
    EXPECT_LE(testing::max_abs_difference(clip.samples, whole), 1.0 / 32768 + 1e-6)
        << "16-bit WAV samples against the whole decode";
}

TEST(SpeakAudio, ACodecWithOtherCodebooksIsRefused) {
    testing::TempDir dir("speak-audio-mismatch");
    // The fixture's Drama 3 writes 10 codebooks; the tiny codec reads 4.
    const testing::CliResult result =
        testing::run_duet("speak --model " + fixture_dir("drama3_tiny") + " --codec " + fixture_dir("fish_codec_tiny") +
                          " --text hi --out " + dir.file("x.wav"));
    EXPECT_NE(result.exit_code, 0);
    EXPECT_NE(result.err.find("the codec reads 4 codebooks but the model writes 10"), std::string::npos) << result.err;
}

// Codes [books, frames] streamed frame by frame into a float WAV file.
void stream_codes(const fish_codec::FishCodec& codec, const std::vector<int32_t>& codes, int64_t frames,
                  const std::string& path, ThreadPool* pool, fish_codec::Decoding decoding) {
    const int64_t books = codec.codebooks();
    fish_codec::WavStream stream(codec, path, pool, WavSampleFormat::Float32, decoding);
    std::vector<int32_t> frame(static_cast<size_t>(books));
    for (int64_t f = 0; f < frames; ++f) {
        for (int64_t k = 0; k < books; ++k) frame[k] = codes[k * frames + f];
        stream.add(frame);
    }
    stream.finish();
    EXPECT_EQ(stream.frames(), frames);
}

TEST(SpeakAudio, WavStreamEqualsWholeDecodeInFloat) {
    const fish_codec::FishCodec codec = fish_codec::FishCodec::load(fixture_dir("fish_codec_tiny"));
    testing::TempDir dir("wav-stream");
    ThreadPool pool(2);
    // 23 frames: a first chunk, a full one and a remainder; 3: only the remainder.
    for (int64_t frames : {23, 3}) {
        std::vector<int32_t> codes(static_cast<size_t>(codec.codebooks() * frames));
        for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<int32_t>((i * 7919) % 32);
        stream_codes(codec, codes, frames, dir.file("in_call.wav"), &pool, fish_codec::Decoding::InCall);
        stream_codes(codec, codes, frames, dir.file("background.wav"), &pool, fish_codec::Decoding::Background);
        const std::vector<float> whole = codec.decode(codes, frames, &pool);
        const AudioClip in_call = read_audio_file(dir.file("in_call.wav"));
        const AudioClip background = read_audio_file(dir.file("background.wav"));
        ASSERT_EQ(in_call.samples.size(), whole.size()) << frames << " frames";
        EXPECT_LE(testing::relative_error(in_call.samples, whole), 1e-5) << frames << " frames";
        // The same chunks, so the same samples.
        EXPECT_EQ(background.samples, in_call.samples) << frames << " frames";
    }
}

TEST(SpeakAudio, ABackgroundWavStreamLeftUnfinishedStops) {
    const fish_codec::FishCodec codec = fish_codec::FishCodec::load(fixture_dir("fish_codec_tiny"));
    testing::TempDir dir("wav-stream-unfinished");
    ThreadPool pool(2);
    const std::vector<int32_t> frame(static_cast<size_t>(codec.codebooks()), 5);
    {
        fish_codec::WavStream stream(codec, dir.file("a.wav"), &pool, WavSampleFormat::Float32,
                                     fish_codec::Decoding::Background);
        for (int i = 0; i < 40; ++i) stream.add(frame);
        EXPECT_THROW(stream.add(std::vector<int32_t>(1, 0)), Error);
    }  // destroyed without finish(): the decoder thread must stop, not wait for more frames
}

}  // namespace
}  // namespace duet
