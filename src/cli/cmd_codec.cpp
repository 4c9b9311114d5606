// duet codec: the Fish codec by hand. `decode` turns a codes file into audio, `encode` audio into
// codes, each in a stable file form (safetensors `codes` [1 + n_codebooks, frames] int32, and a WAV
// or safetensors `audio` [samples] f32).
#include <cstdio>
#include <cstring>

#include "audio/resample.h"
#include "base/error.h"
#include "cli/commands.h"
#include "io/audio_file.h"
#include "io/safetensors.h"
#include "models/fish_codec/codec.h"
#include "models/weight_binder.h"

namespace duet::cli {

namespace {

const char* kCodecUsage =
    "duet codec decode --codec DIR --codes FILE.safetensors --out OUT.wav|OUT.safetensors [--float]\n"
    "duet codec encode --codec DIR --audio IN.wav|IN.flac|IN.ogg|IN.safetensors --out FILE.safetensors";

int decode(const Argv& argv) {
    Args args(argv, {"--codec", "--codes", "--out", "--threads", "--device", "--codec-device"}, {"--float"});
    const std::string codes_path = args.text("--codes"), out = args.text("--out");
    const fish_codec::FishCodec codec = fish_codec::FishCodec::load(args.text("--codec"));
    const SafetensorsFile file = SafetensorsFile::open(codes_path);
    const TensorEntry* t = file.find("codes");
    require(t != nullptr, codes_path, ": no tensor 'codes'");
    require(t->shape.size() == 2 && t->shape[0] == codec.codebooks(), codes_path, ": 'codes' has shape ",
            shape_to_string(t->shape), ", expected [", codec.codebooks(), ", frames]");
    const std::vector<int32_t> codes = read_i32(*t);
    Runtime rt(args);
    rt.note_codec_device();
    const std::vector<float> audio = fish_codec::decode_in_chunks(*rt.codec_decoder(codec), codes, codec.codebooks(),
                                                                  t->shape[1], rt.codec_chunk_frames());
    if (out.ends_with(".safetensors")) {
        write_safetensors(out, {{"audio", DType::F32, {static_cast<int64_t>(audio.size())}, audio.data(),
                                 audio.size() * sizeof(float)}});
    } else {
        require(out.ends_with(".wav"), out, ": --out must end in .wav or .safetensors");
        write_wav(out, audio.data(), audio.size(), codec.sample_rate(),
                  args.has("--float") ? WavSampleFormat::Float32 : WavSampleFormat::Pcm16);
    }
    std::fprintf(stderr, "decoded %ld frames to %zu samples at %d Hz in %s\n", static_cast<long>(t->shape[1]),
                 audio.size(), codec.sample_rate(), out.c_str());
    return 0;
}

int encode(const Argv& argv) {
    Args args(argv, {"--codec", "--audio", "--out", "--threads", "--device"}, {});
    const std::string in = args.text("--audio"), out = args.text("--out");
    const fish_codec::FishCodec codec = fish_codec::FishCodec::load(args.text("--codec"));
    std::vector<float> audio;
    if (in.ends_with(".safetensors")) {
        const SafetensorsFile file = SafetensorsFile::open(in);
        const TensorEntry* t = file.find("audio");
        require(t != nullptr && t->shape.size() == 1, in, ": expected a tensor 'audio' [samples]");
        audio = read_f32(*t);
    } else {
        const AudioClip clip = read_audio_file(in);
        audio = resample(downmix_to_mono(clip), clip.sample_rate, codec.sample_rate());
    }
    Runtime rt(args);
    const std::vector<int32_t> codes = rt.codec_encode(codec, audio);
    const int64_t frames = static_cast<int64_t>(codes.size()) / codec.codebooks();
    write_safetensors(out, {{"codes", DType::I32, {codec.codebooks(), frames}, codes.data(),
                             codes.size() * sizeof(int32_t)}});
    std::fprintf(stderr, "encoded %zu samples to %ld frames in %s\n", audio.size(), static_cast<long>(frames),
                 out.c_str());
    return 0;
}

}  // namespace

int run_codec(const Argv& argv) {
    if (argv.empty()) throw UsageError{str_cat("expected decode or encode:\n", kCodecUsage)};
    const Argv rest(argv.begin() + 1, argv.end());
    if (argv[0] == "decode") return decode(rest);
    if (argv[0] == "encode") return encode(rest);
    throw UsageError{str_cat("unknown codec command '", argv[0], "':\n", kCodecUsage)};
}

}  // namespace duet::cli
