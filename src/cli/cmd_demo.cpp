// duet demo: the whole path on built-in models with random weights, so their output is noise. By
// default text to speech: a tiny Drama 3 speaks through the built-in byte tokenizer and a tiny Fish
// codec streams its frames into a WAV file. `--generate`: a tiny Nemotron-H is written to a checkpoint
// directory, loaded back like any downloaded model and asked to continue a prompt. `--transcribe`:
// a tiny Transcribe directory is written for `duet transcribe`.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "cli/commands.h"
#include "models/generate.h"
#include "models/registry.h"
#include "models/nemotron_h/presets.h"
#include "models/nemotron_h/random_weights.h"
#include "models/drama3/presets.h"
#include "models/drama3/random_weights.h"
#include "models/drama3/speak_text.h"
#include "models/fish_codec/random_weights.h"
#include "models/fish_codec/wav_stream.h"
#include "models/transcribe/tiny_model.h"
#include "text/demo_tokenizer.h"

namespace duet::cli {


namespace {

// A tiny random Transcribe directory from a perception checkpoint and a tokenizer with the Transcribe
// structural tokens (the transcribe_audio_tiny and tokenizer_qwen2_pattern fixtures fit), for
// `duet transcribe --model DIR` to run on.
int write_transcribe_demo(const Args& args) {
    const std::string dir =
        args.text_or("--dir", (std::filesystem::temp_directory_path() / "duet-demo-transcribe").string());
    Runtime rt(args);
    transcribe::write_tiny_transcribe_model(dir, args.text("--perception"), args.text("--tokenizer"),
                                            /*seed=*/20261201, &rt.pool);
    std::printf("duet demo: a tiny Transcribe model (the perception of %s, a RANDOM Nemotron-H with its MTP module)\n"
                "written to %s; run `duet transcribe --model %s FILE.wav` (its text is noise)\n",
                args.text("--perception").c_str(), dir.c_str(), dir.c_str());
    return 0;
}

// Text to a WAV file with a tiny random Drama 3 and a tiny random codec that reads its codebooks.
int speak_demo(const Args& args) {
    const std::string out = args.text_or("--out", "duet-demo.wav");
    Runtime rt(args);
    const drama3::Config config = drama3::preset_config("tiny");
    const drama3::Model model =
        drama3::Model::from_tensors(config, drama3::make_random_weights(config, /*seed=*/20261201, &rt.pool));
    const auto tokenizer = text::Tokenizer::from_json(
        text::demo_tokenizer_json(static_cast<int32_t>(config.semantic_count())), "the built-in demo tokenizer");
    const fish_codec::FishCodec codec =
        fish_codec::FishCodec::random(fish_codec::tiny_config(), /*seed=*/20261201, &rt.pool);

    const std::string text = "Hello from duet. This voice comes from a tiny model with random weights.";
    drama3::SpeakOptions options;
    options.max_frames = args.integer_or("-n", 200, 1, 100000);
    options.sampling.params.seed = 1;
    drama3::Speaker speaker(model, *rt.backend, 4096);
    fish_codec::WavStream audio(codec, out, &rt.pool);
    const drama3::SpokenFrames spoken = drama3::speak_text(
        speaker, *tokenizer, text, nullptr, options, [&](std::span<const int32_t> frame) { audio.add(frame.subspan(1)); });
    audio.finish();
    std::printf("duet demo: a tiny Drama 3 (%s backbone, %ld-layer codebook tower) and a tiny Fish codec, both with\n"
                "RANDOM weights, spoke \"%s\" as %zu frames (%s): %.2f s of %d Hz audio written to %s.\n"
                "The weights are random, so the audio is noise: the demo shows text becoming frames and frames\n"
                "becoming a WAV file end to end. Point `duet speak --model DIR` at a real Drama 3 checkpoint.\n",
                config.backbone.pattern().c_str(), static_cast<long>(config.tower.layers()), text.c_str(),
                spoken.frames.count(), drama3::stop_reason_name(spoken.reason),
                static_cast<double>(audio.samples()) / codec.sample_rate(), codec.sample_rate(), out.c_str());
    return 0;
}

int generate_demo(const Args& args) {
    const int64_t count = args.integer_or("-n", 12, 1, 4096);
    const std::filesystem::path dir =
        args.text_or("--dir", (std::filesystem::temp_directory_path() / "duet-demo-nemotron_h").string());
    Runtime rt(args);

    const nemotron_h::Config config = nemotron_h::preset_config("tiny");
    std::filesystem::create_directories(dir);
    {
        const auto tensors = nemotron_h::make_random_weights(config, /*seed=*/20261201, &rt.pool);
        tensors->write((dir / "model.safetensors").string());
        std::ofstream(dir / "config.json") << json::dump(nemotron_h::config_to_json(config)) << "\n";
        require(std::filesystem::exists(dir / "config.json"), dir.string(), ": could not write config.json");
    }

    const std::unique_ptr<CausalLM> model = load_causal_lm(dir.string());
    const std::unique_ptr<SequenceState> state = model->create_state(*rt.backend, 256);
    const std::vector<int32_t> prompt = {1, 17, 42, 99, 256, 7, 311, 64};
    const GreedyOutput out = generate_greedy(*model, *rt.backend, *state, prompt, count);

    std::printf("duet demo: a tiny Nemotron-H (%s, hidden %ld, vocab %ld) with RANDOM weights, written to %s\n",
                config.pattern().c_str(), static_cast<long>(config.hidden), static_cast<long>(config.vocab),
                dir.string().c_str());
    std::printf("prompt ids:    %s\n", join_ids(prompt).c_str());
    std::printf("greedy ids:    %s\n", join_ids(out.ids).c_str());
    std::printf("The weights are random, so these ids are noise: the demo shows the engine loading a checkpoint,\n"
                "prefilling and decoding end to end. Point `duet generate --model DIR` at a real checkpoint.\n");
    return 0;
}

}  // namespace

int run_demo(const Argv& argv) {
    Args args(argv, {"--dir", "--out", "--threads", "--device", "-n", "--perception", "--tokenizer"},
              {"--transcribe", "--generate"});
    if (args.has("--transcribe")) return write_transcribe_demo(args);
    if (args.has("--generate")) return generate_demo(args);
    return speak_demo(args);
}

}  // namespace duet::cli
