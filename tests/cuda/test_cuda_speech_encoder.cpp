// Transcribe's speech encoders with their layers on the GPU (CudaPerceptionDevice): the whole audio path
// against the transcribe_audio_tiny fixture at the CPU's tolerance, and against the CPU's own path on
// random weights over three windows of audio (so the speaker branch's cached frames make queries
// attend to fewer keys than there are frames), the layers alone for every count of keys, the
// products around the layers alone, and the log-mel front end against the CPU's.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_speech_encoder.h"
#include "base/thread_pool.h"
#include "cuda_test_support.h"
#include "io/safetensors.h"
#include "models/transcribe/perception.h"
#include "models/transcribe/presets.h"
#include "kernel_test_support.h"
#include "test_support.h"

namespace duet::transcribe {
namespace {

using duet::testing::fixture_dir;
using duet::testing::random_values;
using duet::testing::relative_error;

class CudaSpeechEncoderTest : public cuda::testing::DeviceTest {};

TEST_F(CudaSpeechEncoderTest, PerceptionMatchesTheFixture) {
    const std::string dir = fixture_dir("transcribe_audio_tiny");
    const SafetensorsFile expected = SafetensorsFile::open(dir + "/expected.safetensors");
    Perception perception = Perception::load(dir);
    perception.run_on_device(cuda::make_cuda_perception_device());
    ThreadPool pool(2);
    const PerceptionOutput out = perception.perceive(read_f32(*expected.find("waveform")), &pool);
    constexpr double kTolerance = 1e-3;  // relative to each tensor's max, as fixture.json gives it
    for (const auto& [name, actual] :
         {std::pair{"asr_hidden", &out.asr_hidden}, std::pair{"spk_probs_10ms", &out.spk_probs_10ms},
          std::pair{"fused", &out.fused}, std::pair{"projected", &out.projected}}) {
        EXPECT_LT(relative_error(*actual, read_f32(*expected.find(name))), kTolerance) << name;
    }
}

TEST_F(CudaSpeechEncoderTest, LongAudioMatchesTheCpu) {
    const PerceptionConfig config = perception_preset("tiny");
    Perception perception = Perception::from_tensors(config, make_random_perception_weights(config, 5, nullptr));
    std::mt19937 rng(7);
    std::vector<float> wave = random_values(rng, 16000 * 95 + 123, -0.3f, 0.3f);  // 95 s: three windows
    for (size_t i = 0; i < wave.size(); ++i) wave[i] *= 0.6f + 0.4f * std::sin(static_cast<float>(i) * 1e-4f);
    ThreadPool pool(2);
    const PerceptionOutput want = perception.perceive(wave, &pool);
    perception.run_on_device(cuda::make_cuda_perception_device());
    const PerceptionOutput got = perception.perceive(wave, &pool);
    ASSERT_EQ(got.windows, 3);
    EXPECT_LE(relative_error(got.asr_hidden, want.asr_hidden), 1e-4);
    EXPECT_LE(relative_error(got.spk_probs_10ms, want.spk_probs_10ms), 1e-4);
    EXPECT_LE(relative_error(got.projected, want.projected), 1e-4);
}

// The layers alone, both encoders' shapes, every frame attending to all, some or none of the frames.
TEST_F(CudaSpeechEncoderTest, LayersMatchTheCpuForEveryKeyCount) {
    const PerceptionConfig config = perception_preset("tiny");
    const Perception perception =
        Perception::from_tensors(config, make_random_perception_weights(config, 9, nullptr));
    cuda::CudaPerceptionDevice gpu;
    std::mt19937 rng(3);
    for (const bool asr : {true, false}) {
        const EncoderConfig& c = asr ? config.asr : config.speaker;
        const EncoderWeights& w = asr ? perception.weights().asr : perception.weights().speaker;
        const int64_t n = 11;
        const std::vector<float> start = random_values(rng, n * c.width, -2.0f, 2.0f);
        for (const int64_t keys : {n, int64_t{4}, int64_t{0}}) {
            SCOPED_TRACE(::testing::Message() << (asr ? "asr" : "speaker") << ", keys " << keys);
            std::vector<float> want = start, got = start;
            encode_projected(c, w, want, n, keys, nullptr);
            gpu.run(c, w, got, n, keys);
            EXPECT_LE(relative_error(got, want), 1e-5);
        }
    }
}

// The products around the layers (stacking, the Sortformer head's, the projector): bf16 and f32
// weights, with and without a bias, against the CPU's on the same random rows.
TEST_F(CudaSpeechEncoderTest, ProductsMatchTheCpu) {
    const PerceptionConfig config = perception_preset("tiny");
    const Perception perception =
        Perception::from_tensors(config, make_random_perception_weights(config, 4, nullptr));
    const PerceptionWeights& pw = perception.weights();
    std::mt19937 rng(5);
    const std::vector<float> f32_matrix = random_values(rng, 24 * 40, -0.5f, 0.5f);
    const std::vector<std::pair<std::string, LinearWeights>> products = {
        {"asr stacking", LinearWeights{pw.asr.pre_encode, {}}},
        {"projector", pw.proj},
        {"sortformer encoder_proj", pw.head.encoder_proj},
        {"f32 with a bias", LinearWeights{MatrixView{DType::F32, 24, 40, f32_matrix.data()},
                                          random_values(rng, 24, -1.0f, 1.0f)}}};
    cuda::CudaPerceptionDevice gpu;
    for (const auto& [name, w] : products) {
        for (const int64_t n : {int64_t{1}, int64_t{37}}) {
            SCOPED_TRACE(::testing::Message() << name << ", " << n << " rows");
            const std::vector<float> x = random_values(rng, n * w.weight.cols, -2.0f, 2.0f);
            std::vector<float> want(static_cast<size_t>(n * w.weight.rows)), got(want.size(), -7.0f);
            linear(w, x.data(), n, want.data(), nullptr);
            gpu.linear(w, x.data(), n, got.data());
            EXPECT_LE(relative_error(got, want), 1e-5);
        }
    }
}

// The front end does the CPU's arithmetic in the CPU's order, so only the logarithm's rounding may
// differ: rows of both forms within a float's last bits, at NeMo's settings and at smaller ones,
// for the shortest audio it takes, lengths between hops and a minute of it.
TEST_F(CudaSpeechEncoderTest, LogMelMatchesTheCpu) {
    audio::MelSettings small;
    small.n_fft = 256;
    small.win_length = 200;
    small.hop = 80;
    small.n_mels = 40;
    small.pad_to = 8;
    std::mt19937 rng(11);
    cuda::CudaPerceptionDevice gpu;
    for (const audio::MelSettings& settings : {audio::MelSettings{}, small}) {
        const audio::LogMelFrontEnd front_end(settings, {}, {});
        for (const int64_t samples : {2 * settings.hop, int64_t{16000 * 3 + 77}, int64_t{16000 * 60}}) {
            SCOPED_TRACE(::testing::Message() << "n_fft " << settings.n_fft << ", " << samples << " samples");
            std::vector<float> wave = random_values(rng, samples, -0.5f, 0.5f);
            for (size_t i = 0; i < wave.size(); ++i) wave[i] *= 0.2f + 0.8f * std::fabs(std::sin(float(i) * 3e-4f));
            const audio::LogMel want = front_end.compute(wave, nullptr);
            const audio::LogMel want_normalized = audio::normalize_per_feature(want);
            const audio::LogMelForms got = gpu.log_mel(front_end, wave);
            ASSERT_EQ(got.raw.frames, want.frames);
            ASSERT_EQ(got.raw.valid, want.valid);
            ASSERT_EQ(got.normalized.frames, want.frames);
            EXPECT_LE(relative_error(got.raw.values, want.values), 1e-6);
            EXPECT_LE(relative_error(got.normalized.values, want_normalized.values), 1e-6);
        }
    }
    EXPECT_THROW(gpu.log_mel(audio::LogMelFrontEnd(small, {}, {}), std::vector<float>(100)), Error);
}

}  // namespace
}  // namespace duet::transcribe
