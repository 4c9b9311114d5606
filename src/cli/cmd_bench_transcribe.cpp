// duet bench --arch transcribe: Transcribe's audio path on a fixed recording of noise, at random
// weights of a preset size or from a checkpoint. The headline figure is encoder seconds (ASR encoder
// plus speaker encoder and head) per minute of audio on this machine.
#include <cmath>
#include <cstdio>
#include <optional>

#include "base/error.h"
#include "cli/bench_support.h"
#include "models/transcribe/perception.h"
#include "models/transcribe/presets.h"

namespace duet::cli {

namespace {

// Deterministic noise with a slowly varying level, the same on every machine.
std::vector<float> bench_audio(int64_t samples) {
    std::vector<float> wave(static_cast<size_t>(samples));
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < samples; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const float unit = static_cast<float>(x >> 40) / 16777216.0f - 0.5f;
        wave[i] = 0.3f * unit * (0.6f + 0.4f * std::sin(static_cast<float>(i) * 1e-4f));
    }
    return wave;
}

}  // namespace

int bench_transcribe(const Args& args) {
    const bool random = random_weights_flag(args);
    const int64_t audio_seconds = args.integer_or("--audio-seconds", 60, 1, 4 * 3600);
    Runtime rt(args);

    const auto load_start = Clock::now();
    std::string source;
    std::optional<transcribe::Perception> loaded;
    if (random) {
        const std::string preset = args.text("--preset");
        const transcribe::PerceptionConfig config = transcribe::perception_preset(preset);
        require_fits_in_memory(static_cast<double>(transcribe::random_perception_weight_bytes(config)),
                               "preset " + preset);
        const auto seed = static_cast<uint64_t>(args.integer_or("--seed", 1, 0, INT64_MAX));
        loaded.emplace(transcribe::Perception::from_tensors(
            config, transcribe::make_random_perception_weights(config, seed, &rt.pool)));
        source = "random:" + preset;
    } else {
        source = args.text("--model");
        loaded.emplace(transcribe::Perception::load(source));
    }
    loaded->run_on_device(rt.perception_device());
    const transcribe::Perception& perception = *loaded;
    const double load_s = seconds_since(load_start);

    const std::vector<float> wave = bench_audio(audio_seconds * perception.config().mel.sample_rate);
    const auto start = Clock::now();
    const transcribe::PerceptionOutput out = perception.perceive(wave, &rt.pool);
    const double total_s = seconds_since(start);
    const transcribe::PerceptionTimings& t = out.seconds;
    const double minutes = static_cast<double>(audio_seconds) / 60.0;
    const double encoder_s = t.asr_encoder + t.speaker_branch;

    json::Value o = json::Value::object();
    o.set("arch", json::Value(std::string("transcribe")));
    o.set("weights", json::Value(source));
    o.set("weight_bytes", json::Value(static_cast<int64_t>(perception.tensor_bytes())));
    o.set("load_s", json::Value(load_s));
    add_runtime_figures(o, rt, nullptr);
    rt.note_cpu_part(kTranscribeCpuPart);
    o.set("audio_seconds", json::Value(audio_seconds));
    o.set("audio_tokens", json::Value(out.audio_tokens));
    o.set("windows", json::Value(out.windows));
    o.set("front_end_s", json::Value(t.front_end));
    o.set("asr_encoder_s", json::Value(t.asr_encoder));
    o.set("speaker_branch_s", json::Value(t.speaker_branch));
    o.set("fusion_s", json::Value(t.fusion));
    o.set("total_s", json::Value(total_s));
    o.set("encoder_s_per_audio_minute", json::Value(encoder_s / minutes));
    o.set("total_s_per_audio_minute", json::Value(total_s / minutes));
    o.set("real_time_factor", json::Value(static_cast<double>(audio_seconds) / total_s));
    std::printf("%s\n", json::dump(o).c_str());
    return 0;
}

}  // namespace duet::cli
