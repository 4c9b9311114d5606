// The Fish codec against fish-speech's own outputs on the tiny random-weight fixture, loaded from
// both codec.pth and codec.safetensors; and streaming decode against whole decode, encodes in chunks
// against encoding at once.
#include <random>

#include "models/fish_codec/codec.h"
#include "test_support.h"

namespace duet {
namespace {

using fish_codec::FishCodec;
using fish_codec::StreamingDecoder;
using testing::fixture_dir;

struct Expected {
    SafetensorsFile file = SafetensorsFile::open(fixture_dir("fish_codec_tiny") + "/expected.safetensors");
    const TensorEntry& get(const char* name) const {
        const TensorEntry* t = file.find(name);
        if (t == nullptr) throw Error(str_cat("expected.safetensors: no '", name, "'"));
        return *t;
    }
};

const FishCodec& codec_from(const std::string& file) {
    static std::map<std::string, FishCodec> cache;
    auto it = cache.find(file);
    if (it == cache.end()) it = cache.emplace(file, FishCodec::load(fixture_dir("fish_codec_tiny") + "/" + file)).first;
    return it->second;
}

class FishCodecFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(FishCodecFixture, DecodeMatchesReference) {
    const Expected expected;
    const FishCodec& codec = codec_from(GetParam());
    const TensorEntry& codes = expected.get("codes");
    ASSERT_EQ(codes.shape[0], codec.codebooks());
    const int64_t frames = codes.shape[1];
    ThreadPool pool(2);
    const std::vector<float> audio = codec.decode(testing::read_i32(codes), frames, &pool);
    const std::vector<float> reference = read_f32(expected.get("audio"));
    EXPECT_EQ(audio.size(), static_cast<size_t>(frames * 2048));
    const double diff = testing::max_abs_difference(audio, reference);
    RecordProperty("max_abs_diff", std::to_string(diff));
    EXPECT_LE(diff, 1e-3);
}

TEST_P(FishCodecFixture, EncodeMatchesReference) {
    const Expected expected;
    const FishCodec& codec = codec_from(GetParam());
    ThreadPool pool(2);
    const std::vector<int32_t> codes = codec.encode(read_f32(expected.get("encode_input")), &pool);
    EXPECT_EQ(codes, testing::read_i32(expected.get("encode_codes")));
}

INSTANTIATE_TEST_SUITE_P(Files, FishCodecFixture, ::testing::Values("codec.pth", "codec.safetensors"),
                         [](const auto& info) { return std::string(info.param).substr(6); });

// Decoding chunk by chunk gives the whole decode's samples.
TEST(FishCodecStreaming, ChunkingsEqualWholeDecode) {
    const Expected expected;
    const FishCodec& codec = codec_from("codec.safetensors");
    const TensorEntry& codes_entry = expected.get("codes");
    const int64_t frames = codes_entry.shape[1], books = codec.codebooks();
    // The fixture's 12 frames, then 28 more drawn at random, so chunks cross the attention window.
    std::vector<int32_t> frame_major = fish_codec::to_frame_major(testing::read_i32(codes_entry), books, frames);
    std::mt19937 rng(7);
    const int64_t total = 40;
    for (int64_t f = frames; f < total; ++f)
        for (int64_t b = 0; b < books; ++b) frame_major.push_back(static_cast<int32_t>(rng() % 32));
    std::vector<int32_t> codebook_major(frame_major.size());
    for (int64_t f = 0; f < total; ++f)
        for (int64_t b = 0; b < books; ++b)
            codebook_major[static_cast<size_t>(b * total + f)] = frame_major[static_cast<size_t>(f * books + b)];

    ThreadPool pool(2);
    const std::vector<float> whole = codec.decode(codebook_major, total, &pool);
    std::vector<std::vector<int64_t>> chunkings = {{1, 4, 16, 19}, std::vector<int64_t>(40, 1), {40}};
    for (int trial = 0; trial < 3; ++trial) {
        std::vector<int64_t> sizes;
        for (int64_t left = total; left > 0;) {
            const int64_t n = std::min<int64_t>(left, 1 + static_cast<int64_t>(rng() % 9));
            sizes.push_back(n);
            left -= n;
        }
        chunkings.push_back(sizes);
    }
    for (const auto& sizes : chunkings) {
        StreamingDecoder stream(codec, &pool);
        std::vector<float> streamed;
        int64_t at = 0;
        for (int64_t n : sizes) {
            const auto part = stream.push(std::span(frame_major).subspan(static_cast<size_t>(at * books),
                                                                         static_cast<size_t>(n * books)));
            EXPECT_EQ(part.size(), static_cast<size_t>(n * codec.samples_per_frame()));
            streamed.insert(streamed.end(), part.begin(), part.end());
            at += n;
        }
        EXPECT_EQ(stream.frames_decoded(), total);
        EXPECT_LE(testing::max_abs_difference(streamed, whole), 1e-5)
            << "chunks of " << ::testing::PrintToString(sizes);
    }
}

// Encoding runs as a stream of chunks; the codes do not depend on their size. 40 frames of noise
// (the fixture's input repeated with random changes), so chunks cross the attention windows.
TEST(FishCodecStreaming, EncodeChunkingsGiveTheSameCodes) {
    const Expected expected;
    const FishCodec& codec = codec_from("codec.safetensors");
    const std::vector<float> input = read_f32(expected.get("encode_input"));
    ASSERT_FALSE(input.empty());
    const int64_t frames = 40;
    std::vector<float> audio(static_cast<size_t>(frames * codec.samples_per_frame()));
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> noise(-0.05f, 0.05f);
    for (size_t i = 0; i < audio.size(); ++i) audio[i] = input[i % input.size()] * 0.8f + noise(rng);
    ThreadPool pool(2);
    const std::vector<int32_t> whole = codec.encode(audio, &pool, frames);
    ASSERT_EQ(whole.size(), static_cast<size_t>(codec.codebooks() * frames));
    for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{16}}) {
        EXPECT_EQ(codec.encode(audio, &pool, chunk), whole) << "chunks of " << chunk << " frames";
    }
    // A clip that ends inside its last frame is padded with zeros, in any chunking.
    const std::span<const float> ragged(audio.data(), audio.size() - 1000);
    EXPECT_EQ(codec.encode(ragged, &pool, 3), codec.encode(ragged, &pool, frames));
}

}  // namespace
}  // namespace duet
