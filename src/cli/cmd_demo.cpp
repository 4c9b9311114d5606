// duet demo: the whole path on a built-in model — a tiny Nemotron-H with random weights is written
// to a checkpoint directory, loaded back like any downloaded model, and asked to continue a prompt.
// The weights are random, so the tokens it produces are noise.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "cli/commands.h"
#include "models/generate.h"
#include "models/registry.h"
#include "models/nemotron_h/presets.h"
#include "models/nemotron_h/random_weights.h"
#include "models/transcribe/tiny_model.h"

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

}  // namespace

int run_demo(const Argv& argv) {
    Args args(argv, {"--dir", "--threads", "--device", "-n", "--perception", "--tokenizer"}, {"--transcribe"});
    if (args.has("--transcribe")) return write_transcribe_demo(args);
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

}  // namespace duet::cli
