// duet speak: text to Drama 3 frames. The text is split into chunks spoken in turn within one
// conversation (so the voice carries over); a reference voice (its codes and transcript) makes it a
// voice-cloning prompt. The checking form runs given prompt rows and dumps every frame's logits.
#include <chrono>
#include <cstring>
#include <optional>
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/commands.h"
#include "io/safetensors.h"
#include "models/drama3/model.h"
#include "models/drama3/speaker.h"
#include "text/drama3_prompt.h"
#include "cli/bench_support.h"
#include "models/drama3/speak_text.h"
#include "models/fish_codec/wav_stream.h"
#include "text/tokenizer.h"

namespace duet::cli {

namespace {

// Frames per second of audio: the codec's 44.1 kHz at 2048 samples per frame.
constexpr double kFramesPerSecond = 44100.0 / 2048.0;

drama3::FrameSampling sampling_flags(const Args& args) {
    drama3::FrameSampling s;
    s.params.temperature = static_cast<float>(args.number_or("--temperature", s.params.temperature, 0.0, 100.0));
    s.params.top_k = args.integer_or("--top-k", s.params.top_k, 0, 1 << 24);
    s.params.top_p = static_cast<float>(args.number_or("--top-p", s.params.top_p, 1e-6, 1.0));
    s.params.seed = static_cast<uint64_t>(args.integer_or("--seed", 0, 0, INT64_MAX));
    return s;
}

// A [rows, cols] int32 (or int64) tensor named `name` in the safetensors file `path`.
std::vector<int32_t> read_int_matrix(const std::string& path, const std::string& name, int64_t& rows, int64_t& cols) {
    const Checkpoint file = Checkpoint::open(path);
    const TensorEntry* t = file.find(name);
    require(t != nullptr, path, ": no tensor '", name, "'");
    require(t->shape.size() == 2, path, ": '", name, "' has ", t->shape.size(), " dimensions, expected 2");
    rows = t->shape[0];
    cols = t->shape[1];
    return read_i32(*t);
}

text::ReferenceVoice read_reference(const Args& args, const drama3::Config& config) {
    text::ReferenceVoice voice;
    const std::string path = args.text("--reference-audio-codes");
    int64_t rows = 0, cols = 0;
    voice.codes = read_int_matrix(path, "codes", rows, cols);
    require(rows == config.tower.num_codebooks, path, ": 'codes' is [", rows, ", ", cols, "], expected [",
            config.tower.num_codebooks, ", frames]");
    voice.frames = static_cast<int>(cols);
    if (!args.has("--reference-text")) throw UsageError{"--reference-audio-codes needs --reference-text"};
    voice.transcript = args.text("--reference-text");
    return voice;
}

void write_frames(const std::string& path, const text::FrameRows& frames) {
    const int64_t g = static_cast<int64_t>(frames.count()), width = frames.width();
    // Also as codes [code0..code9, frames], the layout the codec reads.
    std::vector<int32_t> codes(static_cast<size_t>(g * (width - 1)));
    for (int64_t f = 0; f < g; ++f) {
        for (int64_t k = 0; k + 1 < width; ++k) codes[k * g + f] = frames.row(f)[1 + k];
    }
    write_safetensors(path, {{"frames", DType::I32, {g, width}, frames.values().data(), frames.values().size() * 4},
                             {"codes", DType::I32, {width - 1, g}, codes.data(), codes.size() * 4}});
}

void report(const char* what, int64_t frames, double seconds, drama3::StopReason reason) {
    std::fprintf(stderr, "%s %ld frames (%.2f s of audio) in %.2f s: %.1f frames/s, %s\n", what,
                 static_cast<long>(frames), frames / kFramesPerSecond, seconds, seconds > 0 ? frames / seconds : 0.0,
                 drama3::stop_reason_name(reason));
}

// `--prompt-frames FILE --dump OUT`: the given rows, then every frame with the logits behind it.
int speak_checking_form(const Args& args, const drama3::Model& model, Runtime& rt) {
    const drama3::Config& c = model.config();
    const std::string path = args.text("--prompt-frames");
    int64_t rows = 0, cols = 0;
    const std::vector<int32_t> values = read_int_matrix(path, "prompt_frames", rows, cols);
    require(cols == c.frame_width(), path, ": 'prompt_frames' is [", rows, ", ", cols, "], expected [rows, ",
            c.frame_width(), "]");
    text::FrameRows prompt(static_cast<int>(c.tower.num_codebooks));
    for (int64_t r = 0; r < rows; ++r) prompt.push_row(std::span(values).subspan(r * cols, cols));

    drama3::Speaker speaker(model, *rt.backend, context_flag(args));
    speaker.feed(prompt);
    std::vector<drama3::FrameTrace> traces;
    const auto start = Clock::now();
    const drama3::SpokenFrames out =
        speak_frames(speaker, sampling_flags(args), args.integer_or("--max-frames", 2000, 1, 1 << 24), {}, &traces);
    report("drew", static_cast<int64_t>(out.frames.count()),
           seconds_since(start), out.reason);

    const int64_t g = static_cast<int64_t>(out.frames.count()), codes = c.tower.num_codebooks - 1;
    const size_t head_size = static_cast<size_t>(codes * c.tower.codebook_size);
    std::vector<float> main_logits, head_logits(static_cast<size_t>(g) * head_size, 0.0f);
    for (size_t i = 0; i < traces.size(); ++i) {
        main_logits.insert(main_logits.end(), traces[i].main_logits.begin(), traces[i].main_logits.end());
        std::copy(traces[i].head_logits.begin(), traces[i].head_logits.end(), head_logits.begin() + i * head_size);
    }
    const std::string dump = args.text("--dump");
    write_safetensors(dump, {{"frames", DType::I32, {g, c.frame_width()}, out.frames.values().data(),
                              out.frames.values().size() * 4},
                             {"main_logits", DType::F32, {g, c.candidates()}, main_logits.data(), main_logits.size() * 4},
                             {"head_logits", DType::F32, {g, codes, c.tower.codebook_size}, head_logits.data(),
                              head_logits.size() * 4}});
    std::fprintf(stderr, "wrote frames, main_logits and head_logits to %s\n", dump.c_str());
    return 0;
}

}  // namespace

int run_speak(const Argv& argv) {
    Args args(argv,
              {"--model", "--text", "--reference-audio-codes", "--reference-text", "--out", "--seed", "--temperature",
               "--top-k", "--top-p", "--max-frames", "--chunk-bytes", "--prompt-frames", "--dump", "--codec", "--threads",
               "--device", "--ctx", "--codec-device"},
              {});
    const std::string dir = args.text("--model");
    const drama3::Model model = drama3::Model::load(dir);
    Runtime rt(args);
    if (args.has("--prompt-frames")) return speak_checking_form(args, model, rt);

    const std::string text = args.text("--text");
    const std::string out_path = args.text("--out");
    const bool wav = out_path.ends_with(".wav");
    require(wav || out_path.ends_with(".safetensors"), out_path,
            ": expected a .wav file for the audio or a .safetensors file for the frames");
    const drama3::Config& c = model.config();
    // Audio needs the codec: codec.pth or codec.safetensors in --codec DIR, else beside the model.
    std::optional<fish_codec::FishCodec> codec;
    std::optional<fish_codec::WavStream> audio;
    if (wav) {
        codec.emplace(fish_codec::FishCodec::load(args.text_or("--codec", dir)));
        require(codec->codebooks() == c.tower.num_codebooks, "the codec reads ", codec->codebooks(),
                " codebooks but the model writes ", c.tower.num_codebooks);
        audio.emplace(*codec, rt.codec_decoder(*codec), out_path, WavSampleFormat::Pcm16, rt.codec_decoding());
        rt.note_codec_device();
    }
    const std::unique_ptr<text::Tokenizer> tokenizer = text::Tokenizer::load(dir + "/tokenizer.json");
    std::optional<text::ReferenceVoice> voice;
    if (args.has("--reference-audio-codes")) voice = read_reference(args, c);
    drama3::SpeakOptions options;
    options.sampling = sampling_flags(args);
    options.max_frames = args.integer_or("--max-frames", options.max_frames, 1, 1 << 24);
    options.chunk_bytes = static_cast<size_t>(args.integer_or("--chunk-bytes", 600, 64, 1 << 20));

    drama3::Speaker speaker(model, *rt.backend, context_flag(args));
    const auto start = Clock::now();
    const auto stream_frame = [&](std::span<const int32_t> frame) {
        if (audio) audio->add(frame.subspan(1));  // the codes, without the main token
    };
    const drama3::SpokenFrames spoken = drama3::speak_text(
        speaker, *tokenizer, text, voice ? &*voice : nullptr, options, stream_frame,
        [](size_t i, size_t n, size_t frames) {
            if (n > 1) std::fprintf(stderr, "chunk %zu/%zu: %zu frames\n", i + 1, n, frames);
        });
    report("spoke", static_cast<int64_t>(spoken.frames.count()), seconds_since(start), spoken.reason);
    if (audio) {
        audio->finish();
        std::fprintf(stderr, "wrote %.2f s of audio to %s (first audio after %.2f s)\n",
                     static_cast<double>(audio->samples()) / codec->sample_rate(), out_path.c_str(),
                     audio->first_audio_seconds());
    } else {
        write_frames(out_path, spoken.frames);
        std::fprintf(stderr, "wrote frames [%zu, %d] and codes to %s\n", spoken.frames.count(), spoken.frames.width(),
                     out_path.c_str());
    }
    return 0;
}

}  // namespace duet::cli
