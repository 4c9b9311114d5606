// The Fish codec's encoder on the GPU: fish-speech's codes for the tiny fixture's input, and the CPU's
// codes for random audio on the fixture's weights and on random ones, whole and in chunks (so every
// causal state carries across chunks). Each code is a nearest-neighbour choice made from f32 sums in
// another order than the CPU's; the counts of differing codes are recorded and must stay zero here.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_codec_encoder.h"
#include "base/thread_pool.h"
#include "cuda_test_support.h"
#include "io/safetensors.h"
#include "models/fish_codec/random_weights.h"

namespace duet::cuda {
namespace {

using fish_codec::FishCodec;

class CudaCodecEncoderTest : public testing::DeviceTest {};

int64_t differing(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    EXPECT_EQ(a.size(), b.size());
    int64_t count = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) count += a[i] != b[i] ? 1 : 0;
    return count;
}

TEST_F(CudaCodecEncoderTest, EncodeMatchesTheFixture) {
    const std::string dir = std::string(DUET_FIXTURES_DIR) + "/fish_codec_tiny";
    const FishCodec codec = FishCodec::load(dir + "/codec.safetensors");
    const SafetensorsFile expected = SafetensorsFile::open(dir + "/expected.safetensors");
    const std::vector<float> input = read_f32(*expected.find("encode_input"));
    const std::vector<int32_t> want = read_i32(*expected.find("encode_codes"));
    CudaCodecEncoder encoder(codec);
    EXPECT_EQ(encoder.encode(input), want);
}

TEST_F(CudaCodecEncoderTest, EncodesLikeTheCpuWholeAndInChunks) {
    ThreadPool pool(2);
    const FishCodec fixture = FishCodec::load(std::string(DUET_FIXTURES_DIR) + "/fish_codec_tiny/codec.safetensors");
    const FishCodec random = FishCodec::random(fish_codec::tiny_config(), 3, &pool);
    for (const FishCodec* codec : {&fixture, &random}) {
        const std::string what = codec == &fixture ? "fixture weights" : "random weights";
        // 19 frames and a part frame of noise with a slowly changing loudness.
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> noise(-0.5f, 0.5f);
        std::vector<float> audio(static_cast<size_t>(19 * codec->samples_per_frame() + 300));
        for (size_t i = 0; i < audio.size(); ++i) audio[i] = noise(rng) * (0.3f + 0.2f * std::sin(float(i) * 3e-4f));
        const std::vector<int32_t> want = codec->encode(audio, &pool);
        for (const int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{8}}) {
            CudaCodecEncoder encoder(*codec);
            const int64_t count = differing(encoder.encode(audio, chunk), want);
            RecordProperty(what + ", chunk " + std::to_string(chunk) + ": codes unlike the CPU's", std::to_string(count));
            EXPECT_EQ(count, 0) << what << ", chunks of " << chunk << " frames, of " << want.size() << " codes";
        }
    }
}

TEST_F(CudaCodecEncoderTest, NoSamplesGiveNoCodes) {
    ThreadPool pool(2);
    const FishCodec codec = FishCodec::random(fish_codec::tiny_config(), 5, &pool);
    CudaCodecEncoder encoder(codec);
    EXPECT_TRUE(encoder.encode({}).empty());
}

}  // namespace
}  // namespace duet::cuda
