// duet bench --arch fish_codec: how fast the codec turns frames into audio on this machine, as one
// JSON line. The real-time factor is seconds of audio per second of wall time (above 1: faster than
// real time). Streaming decode is timed in the chunks a TTS loop would use (4 frames, then 16), with
// the first chunk's latency on its own. Decoding and encoding run on --codec-device.
#include <chrono>
#include <cstdio>

#include "base/error.h"
#include "base/json.h"
#include "cli/bench_support.h"
#include "cli/commands.h"
#include "models/fish_codec/codec.h"
#include "models/fish_codec/random_weights.h"
#include "models/fish_codec/wav_stream.h"

namespace duet::cli {

namespace {

// Fixed pseudo-random codes, the same on every machine.
std::vector<int32_t> bench_codes(const fish_codec::Config& c, int64_t frames) {
    std::vector<int32_t> codes;
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (int64_t b = 0; b < 1 + c.n_codebooks; ++b) {
        const uint64_t size = static_cast<uint64_t>(b == 0 ? c.semantic_codebook_size : c.codebook_size);
        for (int64_t f = 0; f < frames; ++f) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            codes.push_back(static_cast<int32_t>(x % size));
        }
    }
    return codes;
}

}  // namespace

int bench_fish_codec(const Args& args) {
    const bool random = random_weights_flag(args);
    Runtime rt(args);

    auto load_start = Clock::now();
    std::string source;
    fish_codec::FishCodec codec = [&] {
        if (!random) return fish_codec::FishCodec::load(source = args.text("--model"));
        const std::string preset = args.text("--preset");
        if (preset != "tiny" && preset != "real") throw UsageError{"fish_codec presets: tiny, real"};
        source = "random:" + preset;
        const auto seed = static_cast<uint64_t>(args.integer_or("--seed", 1, 0, INT64_MAX));
        return fish_codec::FishCodec::random(preset == "real" ? fish_codec::real_config() : fish_codec::tiny_config(),
                                             seed, &rt.pool);
    }();
    const double load_s = seconds_since(load_start);

    const double seconds = static_cast<double>(args.integer_or("--seconds", 4, 1, 3600));
    const int64_t frames = std::max<int64_t>(
        1, static_cast<int64_t>(seconds * codec.sample_rate() / static_cast<double>(codec.samples_per_frame())));
    const double audio_s = static_cast<double>(frames * codec.samples_per_frame()) / codec.sample_rate();
    const std::vector<int32_t> codes = bench_codes(codec.config(), frames);

    // Decoders are made (and on a GPU, the weights uploaded) before the clock starts.
    const std::unique_ptr<fish_codec::FrameDecoder> whole = rt.codec_decoder(codec);
    const std::unique_ptr<fish_codec::FrameDecoder> stream = rt.codec_decoder(codec);

    auto start = Clock::now();
    const std::vector<float> audio =
        fish_codec::decode_in_chunks(*whole, codes, codec.codebooks(), frames, rt.codec_chunk_frames());
    const double decode_s = seconds_since(start);

    // Streamed in the chunks `duet speak` writes its WAV in.
    const std::vector<int32_t> frame_major = fish_codec::to_frame_major(codes, codec.codebooks(), frames);
    double first_chunk_s = 0.0;
    start = Clock::now();
    for (int64_t f = 0; f < frames;) {
        const int64_t chunk = f == 0 ? fish_codec::WavStream::kFirstChunk : fish_codec::WavStream::kChunk;
        const int64_t n = std::min<int64_t>(chunk, frames - f);
        stream->push(std::span(frame_major).subspan(static_cast<size_t>(f * codec.codebooks()),
                                                    static_cast<size_t>(n * codec.codebooks())));
        if (f == 0) first_chunk_s = seconds_since(start);
        f += n;
    }
    const double stream_s = seconds_since(start);

    json::Value out = json::Value::object();
    out.set("arch", json::Value("fish_codec"));
    out.set("weights", json::Value(source));
    out.set("load_s", json::Value(load_s));
    add_runtime_figures(out, rt, nullptr);
    out.set("backend", json::Value(rt.codec_device));  // where it decodes
    rt.note_codec_device();
    out.set("frames", json::Value(frames));
    out.set("audio_s", json::Value(audio_s));
    out.set("decode_s", json::Value(decode_s));
    out.set("decode_rtf", json::Value(audio_s / decode_s));
    out.set("stream_decode_s", json::Value(stream_s));
    out.set("stream_decode_rtf", json::Value(audio_s / stream_s));
    out.set("stream_first_chunk_frames", json::Value(std::min<int64_t>(fish_codec::WavStream::kFirstChunk, frames)));
    out.set("stream_first_chunk_ms", json::Value(first_chunk_s * 1e3));
    if (!args.has("--no-encode")) {
        out.set("encode_backend", json::Value(rt.codec_device));
        start = Clock::now();
        const std::vector<int32_t> encoded = rt.codec_encode(codec, audio);
        const double encode_s = seconds_since(start);
        out.set("encode_s", json::Value(encode_s));
        out.set("encode_rtf", json::Value(audio_s / encode_s));
    }
    std::printf("%s\n", json::dump(out).c_str());
    return 0;
}

}  // namespace duet::cli
