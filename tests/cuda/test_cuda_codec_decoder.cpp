// The Fish codec's decoder on the GPU: against fish-speech's outputs on the tiny fixture, and against
// the CPU's StreamingDecoder on the fixture's weights and on random ones, streamed in uneven chunks
// (so every causal state, the transformer's window included, carries across chunks) and with codes
// past their codebook's end.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "backend/cuda/cuda_codec_decoder.h"
#include "cuda_test_support.h"
#include "io/safetensors.h"
#include "kernels/cpu/simd_level.h"
#include "models/fish_codec/random_weights.h"

namespace duet::cuda {
namespace {

using fish_codec::FishCodec;

class CudaCodecDecoderTest : public testing::DeviceTest {};

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double worst = 0.0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    return worst;
}

// Frame-major random codes, some past their codebook's end (the decoders clamp them).
std::vector<int32_t> random_frames(const fish_codec::Config& c, int64_t frames, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> codes;
    for (int64_t f = 0; f < frames; ++f)
        for (int64_t b = 0; b <= c.n_codebooks; ++b) {
            const int64_t size = b == 0 ? c.semantic_codebook_size : c.codebook_size;
            codes.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(size + 3)));
        }
    return codes;
}

// Samples of `frames` pushed in chunks of the given sizes, in turn.
std::vector<float> push_in_chunks(fish_codec::FrameDecoder& decoder, const std::vector<int32_t>& frames,
                                  int64_t codebooks, const std::vector<int64_t>& chunks) {
    std::vector<float> audio;
    const int64_t total = static_cast<int64_t>(frames.size()) / codebooks;
    for (int64_t f = 0, i = 0; f < total; ++i) {
        const int64_t n = std::min(chunks[static_cast<size_t>(i) % chunks.size()], total - f);
        const std::vector<float> part = decoder.push(std::span(frames).subspan(static_cast<size_t>(f * codebooks),
                                                                               static_cast<size_t>(n * codebooks)));
        EXPECT_EQ(static_cast<int64_t>(part.size()), n * 2048);
        audio.insert(audio.end(), part.begin(), part.end());
        f += n;
    }
    return audio;
}

TEST_F(CudaCodecDecoderTest, DecodeMatchesTheFixture) {
    const std::string dir = std::string(DUET_FIXTURES_DIR) + "/fish_codec_tiny";
    const FishCodec codec = FishCodec::load(dir + "/codec.safetensors");
    const SafetensorsFile expected = SafetensorsFile::open(dir + "/expected.safetensors");
    const TensorEntry* codes = expected.find("codes");
    const TensorEntry* reference = expected.find("audio");
    ASSERT_TRUE(codes != nullptr && reference != nullptr);
    ASSERT_EQ(codes->shape[0], codec.codebooks());
    CudaCodecDecoder decoder(std::make_shared<const CudaCodecWeights>(codec));
    const std::vector<float> audio =
        fish_codec::decode_in_chunks(decoder, read_i32(*codes), codec.codebooks(), codes->shape[1], 3);
    const double diff = max_abs_difference(audio, read_f32(*reference));
    RecordProperty("max_abs_diff", std::to_string(diff));
    EXPECT_LE(diff, 1e-3);  // the CPU's tolerance against the same reference
}

// What the CPU's own summation order moves the audio by: its decode at the scalar level against its
// decode at the level in use. Random weights make the codec ill-conditioned (its activations grow
// large, and the Snake's sin² of α·x turns a last-bit change of x into a larger one of the output), so
// two correct decoders that add in different orders part by up to about 1e-2 over 29 frames; the
// tiny fixture's weights part by about 4e-5.
double cpu_order_spread(const FishCodec& codec, const std::vector<int32_t>& frames, const std::vector<float>& at_level,
                        ThreadPool* pool) {
    const cpu::SimdLevel level = cpu::active_simd_level();
    cpu::set_simd_level(cpu::SimdLevel::Scalar);
    fish_codec::StreamingDecoder scalar(codec, pool);
    const std::vector<float> audio = scalar.push(frames);
    cpu::set_simd_level(level);
    return max_abs_difference(audio, at_level);
}

// The GPU decoder, fed the frames in each list of chunk sizes, against the CPU's whole decode: no
// further from it than twice what the CPU's own summation order moves it (and 1e-4).
void expect_streams_like_the_cpu(const FishCodec& codec, const std::vector<int32_t>& frames, const std::string& what,
                                 ThreadPool* pool) {
    const auto total = static_cast<int64_t>(frames.size()) / codec.codebooks();
    fish_codec::StreamingDecoder cpu(codec, pool);
    const std::vector<float> expected = push_in_chunks(cpu, frames, codec.codebooks(), {total});
    const double tolerance = 1e-4 + 2.0 * cpu_order_spread(codec, frames, expected, pool);
    ::testing::Test::RecordProperty(what + " tolerance", std::to_string(tolerance));
    const auto weights = std::make_shared<const CudaCodecWeights>(codec);
    double worst = 0.0;
    // Chunks around the transformer's window of 8: some fit in it, one is longer, and {2, 20} grows
    // the key/value store while it holds rows.
    const std::vector<std::vector<int64_t>> chunk_lists = {{1}, {4, 16}, {3, 7, 2}, {2, 20}, {total}};
    for (const std::vector<int64_t>& chunks : chunk_lists) {
        CudaCodecDecoder gpu(weights);
        const std::vector<float> audio = push_in_chunks(gpu, frames, codec.codebooks(), chunks);
        const double diff = max_abs_difference(audio, expected);
        EXPECT_LE(diff, tolerance) << what << ", first chunk " << chunks[0];
        EXPECT_EQ(gpu.frames_decoded(), total);
        worst = std::max(worst, diff);
    }
    ::testing::Test::RecordProperty(what + " largest difference", std::to_string(worst));
    // The signal is not silence, so the comparison means something.
    const auto loudest = std::max_element(expected.begin(), expected.end(),
                                          [](float a, float b) { return std::fabs(a) < std::fabs(b); });
    EXPECT_GT(std::fabs(*loudest), 1e-3f) << what;
}

TEST_F(CudaCodecDecoderTest, StreamedDecodeMatchesTheCpu) {
    ThreadPool pool(2);
    // The fixture's weights (well conditioned: the tolerance stays near 1e-4) on 29 frames of random codes.
    const FishCodec fixture = FishCodec::load(std::string(DUET_FIXTURES_DIR) + "/fish_codec_tiny/codec.safetensors");
    expect_streams_like_the_cpu(fixture, random_frames(fixture.config(), 29, 5), "fixture weights", &pool);
    // Random weights, with codes past their codebooks' ends.
    const fish_codec::Config config = fish_codec::tiny_config();
    for (uint64_t seed : {3, 11}) {
        const FishCodec codec = FishCodec::random(config, seed, &pool);
        expect_streams_like_the_cpu(codec, random_frames(config, 29, static_cast<uint32_t>(seed)),
                                    "random weights, seed " + std::to_string(seed), &pool);
    }
}

TEST_F(CudaCodecDecoderTest, RejectsNegativeCodesAndPartFrames) {
    ThreadPool pool(2);
    const FishCodec codec = FishCodec::random(fish_codec::tiny_config(), 5, &pool);
    CudaCodecDecoder decoder(std::make_shared<const CudaCodecWeights>(codec));
    std::vector<int32_t> frame(static_cast<size_t>(codec.codebooks()), 1);
    frame[2] = -4;
    try {
        decoder.push(frame);
        FAIL() << "a negative code was decoded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("negative code -4"), std::string::npos) << e.what();
    }
    frame.pop_back();
    frame[2] = 1;
    EXPECT_THROW(decoder.push(frame), Error);
    EXPECT_EQ(decoder.frames_decoded(), 0);
}

}  // namespace
}  // namespace duet::cuda
