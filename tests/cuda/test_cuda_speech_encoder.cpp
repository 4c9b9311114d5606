// Transcribe's speech encoders with their layers on the GPU (CudaEncoderLayers): the whole audio path
// against the transcribe_audio_tiny fixture at the CPU's tolerance, and against the CPU's own path on
// random weights over three windows of audio (so the speaker branch's cached frames make queries
// attend to fewer keys than there are frames), and the layers alone for every count of keys.
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
    perception.run_encoder_layers_on(cuda::make_cuda_encoder_layers());
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
    perception.run_encoder_layers_on(cuda::make_cuda_encoder_layers());
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
    cuda::CudaEncoderLayers gpu;
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

}  // namespace
}  // namespace duet::transcribe
