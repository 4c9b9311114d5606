// duet bench: prefill and decode speed of a model, printed as one JSON line, next to the memory
// bandwidth of the same machine measured in the same run. Decode is memory-bound: its honest
// yardstick is the weight bytes a token reads divided by its time, against what the memory gives.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "cli/bench_support.h"
#include "cli/commands.h"
#include "models/nemotron_h/speculative.h"
#include "models/registry.h"
#include "sample/greedy.h"

namespace duet::cli {

namespace {

// The architectures with a benchmark of their own; --arch names one of them or a language model's.
struct OwnBenchmark {
    const char* arch;
    int (*run)(const Args& args);
};
constexpr OwnBenchmark kOwnBenchmarks[] = {{"drama3", bench_drama3},
                                           {"transcribe", bench_transcribe},
                                           {"fish_codec", bench_fish_codec},
                                           {"product_chain", bench_product_chain}};

void require_language_model(const std::string& arch) {
    const std::vector<std::string> models = architecture_names();
    if (std::find(models.begin(), models.end(), arch) != models.end()) return;
    std::string list;
    for (const std::string& name : models) list += name + ", ";
    for (const OwnBenchmark& own : kOwnBenchmarks) list += std::string(own.arch) + ", ";
    throw UsageError{"--arch is '" + arch + "', expected one of " + list.substr(0, list.size() - 2)};
}

}  // namespace

int run_bench(const Argv& argv) {
    Args args(argv, {"--arch", "--preset", "--model", "--prompt", "--decode", "--ctx", "--threads", "--device",
                     "--seed", "--bandwidth-mib", "--audio-seconds", "--seconds", "--products", "--speech",
                     "--codec", "--codec-device"},
              {"--random-weights", "--no-encode", "--no-speculative"});
    const std::string arch = args.text_or("--arch", "nemotron_h");
    for (const OwnBenchmark& own : kOwnBenchmarks) {
        if (arch == own.arch) return own.run(args);
    }
    require_language_model(arch);
    const bool random = random_weights_flag(args);
    const int64_t prompt_len = args.integer_or("--prompt", 512, 1, 1 << 20);
    const int64_t decode_len = args.integer_or("--decode", 16, 1, 1 << 20);
    const int64_t capacity = bench_capacity(args, prompt_len + decode_len);
    Runtime rt(args);

    std::string source, made_on;
    auto load_start = Clock::now();
    std::unique_ptr<CausalLM> model;
    if (random) {
        const std::string preset = args.text("--preset");
        std::shared_ptr<DeviceTensorStorage> device = random_weight_storage(rt);
        require_fits_in_memory(static_cast<double>(random_causal_lm_bytes(arch, preset)), "preset " + preset,
                               device.get());
        const auto seed = static_cast<uint64_t>(args.integer_or("--seed", 1, 0, INT64_MAX));
        made_on = device != nullptr ? std::string(device->name()) : "host";
        model = random_causal_lm(arch, preset, seed, &rt.pool, std::move(device));
        source = "random:" + preset;
    } else {
        source = args.text("--model");
        model = load_causal_lm(source);
    }
    const double load_s = seconds_since(load_start);
    const int64_t vocab = model->vocab();
    Backend& backend = *rt.backend;

    const std::vector<int32_t> prompt = bench_prompt(prompt_len, vocab);
    const std::unique_ptr<SequenceState> state = model->create_state(backend, capacity);

    // A short untimed warm-up touches every weight once (a GPU backend copies them over then).
    state->reset(backend);
    model->forward(backend, *state, std::span<const int32_t>(prompt.data(), std::min<size_t>(prompt.size(), 8)), false);

    // Prefill: repeated on a fresh state while the runs are short, the median kept.
    std::vector<double> prefill_s;
    std::vector<float> logits;
    auto bench_start = Clock::now();
    do {
        state->reset(backend);
        auto start = Clock::now();
        logits = model->forward(backend, *state, prompt, false);
        prefill_s.push_back(seconds_since(start));
    } while (seconds_since(bench_start) < 2.0 && prefill_s.size() < 10);

    // Decode: greedy tokens fed back one at a time after the prompt, as generation runs them (the
    // model's own greedy step: on an accelerator only the chosen token comes back).
    std::vector<double> decode_s;
    int32_t next = argmax(logits.data(), vocab);
    for (int64_t i = 0; i < decode_len; ++i) {
        auto start = Clock::now();
        next = model->next_greedy(backend, *state, next);
        decode_s.push_back(seconds_since(start));
    }
    // The median step: the first steps also copy weights and record the step on an accelerator.
    const double decode_step_s = median(decode_s);

    // The floor's bytes: the weights and the state touched by a step halfway through the decode.
    const double weight_bytes = static_cast<double>(model->decode_weight_bytes());
    const double state_bytes = static_cast<double>(model->decode_state_bytes(prompt_len + decode_len / 2));
    const double decode_gbs = (weight_bytes + state_bytes) / decode_step_s / 1e9;

    // Speculative decoding of the same number of tokens after the same prompt, where the model has a
    // draft module. With random weights the drafts are rarely right: the figures say what it costs.
    // --no-speculative leaves it out, so that the last step run (the one DUET_CUDA_MARKS reports)
    // is a plain decode step.
    std::optional<nemotron_h::SpeculativeStats> spec;
    const auto* nemotron = dynamic_cast<const nemotron_h::Model*>(model.get());
    if (nemotron != nullptr && nemotron->has_draft() && !args.has("--no-speculative")) {
        nemotron_h::State spec_state = nemotron->new_state(backend, prompt_len + decode_len);
        nemotron_h::MtpDrafter drafter(*nemotron);
        spec.emplace();
        nemotron_h::speculative_greedy(*nemotron, backend, spec_state, prompt, decode_len, drafter, &*spec);
    }

    json::Value out = json::Value::object();
    out.set("arch", json::Value(model->arch()));
    out.set("weights", json::Value(source));
    out.set("weight_bytes", json::Value(static_cast<int64_t>(model->tensor_bytes())));
    out.set("load_s", json::Value(load_s));
    if (random) out.set("weights_made_on", json::Value(made_on));
    add_runtime_figures(out, rt);
    out.set("prompt_tokens", json::Value(prompt_len));
    out.set("capacity", json::Value(capacity));
    out.set("prefill_runs", json::Value(static_cast<int64_t>(prefill_s.size())));
    out.set("prefill_tokens_per_s", json::Value(static_cast<double>(prompt_len) / median(prefill_s)));
    out.set("decode_tokens", json::Value(decode_len));
    out.set("decode_ms_per_token", json::Value(decode_step_s * 1e3));
    out.set("decode_tokens_per_s", json::Value(1.0 / decode_step_s));
    if (spec) {
        // The first token comes from the prefill; the rest from the speculative loop.
        out.set("spec_decode_tokens_per_s", json::Value(static_cast<double>(decode_len - 1) / spec->decode_seconds));
        out.set("spec_drafts_kept", json::Value(spec->drafts_kept));
        out.set("spec_rounds", json::Value(spec->rounds));
        out.set("spec_tokens_per_pass", json::Value(spec->tokens_per_pass()));
    }
    out.set("decode_weight_bytes_per_token", json::Value(static_cast<int64_t>(weight_bytes)));
    out.set("decode_state_bytes_per_token", json::Value(static_cast<int64_t>(state_bytes)));
    add_bandwidth_figures(out, rt, args, decode_gbs);
    std::printf("%s\n", json::dump(out).c_str());
    return 0;
}

}  // namespace duet::cli
