// duet bench --arch drama3: prompt rows per second (backbone and teacher-forced tower) and frames
// per second at batch 1 (candidate head, sampling, the 13-layer tower, the backbone step), with the
// weight bytes a frame reads against the machine's memory bandwidth. With --speech N, also N frames
// of speech with their audio, as `duet speak` makes them.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "cli/bench_support.h"
#include "cli/timed_draws.h"
#include "models/drama3/model.h"
#include "models/drama3/presets.h"
#include "models/drama3/random_weights.h"
#include "models/drama3/speaker.h"
#include "models/fish_codec/random_weights.h"

namespace duet::cli {

namespace {

// The codec for --speech: --codec DIR, else random weights of the real codec's size (or the tiny
// one's, with as many codebooks as the model writes, for a model that does not write the real ten).
fish_codec::FishCodec speech_codec(const Args& args, Runtime& rt, int64_t codebooks) {
    if (args.has("--codec")) return fish_codec::FishCodec::load(args.text("--codec"));
    fish_codec::Config config = fish_codec::real_config();
    if (1 + config.n_codebooks != codebooks) {
        config = fish_codec::tiny_config();
        config.n_codebooks = codebooks - 1;
    }
    return fish_codec::FishCodec::random(config, 1, &rt.pool);
}

// Frames per second of speech with its audio: each step's codes streamed through the codec (on
// --codec-device, beside the model unless both are on the CPU) into a WAV file, from the first step
// until the file is finished.
void add_speech_figures(json::Value& out, const Args& args, Runtime& rt, const drama3::Config& c,
                        drama3::Speaker& speaker, const drama3::FrameSampling& sampling, int64_t frames) {
    const fish_codec::FishCodec codec = speech_codec(args, rt, c.tower.num_codebooks);
    rt.note_codec_device();
    require(codec.codebooks() == c.tower.num_codebooks, "the codec reads ", codec.codebooks(),
            " codebooks but the model writes ", c.tower.num_codebooks);
    const std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("duet-bench-speech-" + std::to_string(getpid()) + ".wav");
    std::vector<int32_t> frame(static_cast<size_t>(c.frame_width()));
    double seconds = 0.0;
    {
        fish_codec::WavStream audio(codec, rt.codec_decoder(codec), path.string(), WavSampleFormat::Pcm16,
                                    rt.codec_decoding());
        const auto start = Clock::now();
        time_draws_until_fed(
            frames, 8 * frames + 64,
            [&] {
                const bool fed = speaker.step(sampling, frame, nullptr, speaker.overlaps_frames());
                if (fed) audio.add(std::span<const int32_t>(frame).subspan(1));  // the codes, without the main token
                return fed;
            },
            "drama3 bench --speech");
        audio.finish();
        seconds = seconds_since(start);
    }
    std::filesystem::remove(path);
    const double audio_s = static_cast<double>(frames * codec.samples_per_frame()) / codec.sample_rate();
    out.set("speech_codec", json::Value(args.has("--codec") ? args.text("--codec") : std::string("random")));
    out.set("speech_codec_device", json::Value(rt.codec_device));
    out.set("speech_frames", json::Value(frames));
    out.set("speech_frames_per_s", json::Value(static_cast<double>(frames) / seconds));
    out.set("speech_real_time_factor", json::Value(audio_s / seconds));
}

}  // namespace

int bench_drama3(const Args& args) {
    const bool random = random_weights_flag(args);
    const int64_t prompt_rows = args.integer_or("--prompt", 512, 2, 1 << 20);
    const int64_t frames = args.integer_or("--decode", 16, 1, 1 << 20);
    const int64_t speech_frames = args.integer_or("--speech", 0, 0, 1 << 20);
    const int64_t capacity = bench_capacity(args, prompt_rows + frames + speech_frames + 1);
    Runtime rt(args);

    const auto load_start = Clock::now();
    std::string source, made_on;
    std::optional<drama3::Model> loaded;
    if (random) {
        const std::string preset = args.text("--preset");
        const drama3::Config config = drama3::preset_config(preset);
        std::shared_ptr<DeviceTensorStorage> device = random_weight_storage(rt);
        require_fits_in_memory(static_cast<double>(drama3::random_weight_bytes(config)), "preset " + preset,
                               device.get());
        const auto seed = static_cast<uint64_t>(args.integer_or("--seed", 1, 0, INT64_MAX));
        made_on = device != nullptr ? std::string(device->name()) : "host";
        loaded.emplace(drama3::Model::from_tensors(
            config, drama3::make_random_weights(config, seed, &rt.pool, std::move(device))));
        source = "random:" + preset;
    } else {
        source = args.text("--model");
        loaded.emplace(drama3::Model::load(source));
    }
    const drama3::Model& model = *loaded;
    const double load_s = seconds_since(load_start);
    const drama3::Config& c = model.config();

    // A prompt of text rows (ids below the semantic range), as a long text's turn would be.
    text::FrameRows prompt(static_cast<int>(c.tower.num_codebooks));
    prompt.push_text(bench_prompt(prompt_rows, c.semantic_start));

    {
        // A short untimed warm-up touches every weight once (a GPU backend copies them over then).
        drama3::Speaker warm(model, *rt.backend, 16);
        warm.feed(prompt.head(8));
        std::vector<int32_t> frame(static_cast<size_t>(c.frame_width()));
        warm.step(drama3::FrameSampling{}, frame);
    }
    std::vector<double> prefill_s;
    std::optional<drama3::Speaker> speaker;
    const auto bench_start = Clock::now();
    do {
        speaker.emplace(model, *rt.backend, capacity);
        rt.backend->finish();  // the speaker's set-up is not the prompt's time
        const auto start = Clock::now();
        speaker->feed(prompt);
        rt.backend->finish();  // feeding issues the prompt's ops: they must have run
        prefill_s.push_back(seconds_since(start));
    } while (seconds_since(bench_start) < 2.0 && prefill_s.size() < 10);

    // Frames at the usual sampling settings; an EOS draw is timed like any step and drawing goes on.
    // Each frame's step is issued before the last one is read back, as speak_frames does.
    drama3::FrameSampling sampling;
    sampling.params.seed = 1;
    std::vector<int32_t> frame(static_cast<size_t>(c.frame_width()));
    const std::vector<double> step_s = time_draws_until_fed(
        frames, 8 * frames + 64, [&] { return speaker->step(sampling, frame, nullptr, speaker->overlaps_frames()); },
        "drama3 bench");
    const auto steps = static_cast<int64_t>(step_s.size());
    // The median frame: the first frames also copy weights and record the step on an accelerator.
    const double frame_s = median(step_s);
    const double weight_bytes = static_cast<double>(model.frame_weight_bytes());
    const double state_bytes = static_cast<double>(model.frame_state_bytes(prompt_rows + frames / 2));
    const double bytes_per_frame = weight_bytes + state_bytes;

    json::Value out = json::Value::object();
    out.set("arch", json::Value(std::string("drama3")));
    out.set("weights", json::Value(source));
    out.set("weight_bytes", json::Value(static_cast<int64_t>(model.tensor_bytes())));
    out.set("load_s", json::Value(load_s));
    if (random) out.set("weights_made_on", json::Value(made_on));
    add_runtime_figures(out, rt);
    out.set("prompt_rows", json::Value(prompt_rows));
    out.set("capacity", json::Value(capacity));
    out.set("prefill_runs", json::Value(static_cast<int64_t>(prefill_s.size())));
    out.set("prefill_rows_per_s", json::Value(static_cast<double>(prompt_rows) / median(prefill_s)));
    out.set("frames", json::Value(steps));
    out.set("ms_per_frame", json::Value(frame_s * 1e3));
    out.set("frames_per_s", json::Value(1.0 / frame_s));
    out.set("real_time_factor", json::Value((1.0 / frame_s) / (44100.0 / 2048.0)));
    out.set("frame_weight_bytes", json::Value(static_cast<int64_t>(weight_bytes)));
    out.set("frame_state_bytes", json::Value(static_cast<int64_t>(state_bytes)));
    add_bandwidth_figures(out, rt, args, bytes_per_frame / frame_s / 1e9);
    if (speech_frames > 0) add_speech_figures(out, args, rt, c, *speaker, sampling, speech_frames);
    std::printf("%s\n", json::dump(out).c_str());
    return 0;
}

}  // namespace duet::cli
