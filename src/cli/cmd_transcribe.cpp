// duet transcribe: speech to text with a Nemotron 3.5 Transcribe directory. The model is loaded once
// for every FILE; the text (or one JSON line per file) goes to stdout, progress to stderr.
#include <algorithm>
#include <cstdio>
#include <string>

#include "audio/speech_input.h"
#include "base/error.h"
#include "cli/commands.h"
#include "models/transcribe/transcriber.h"
#include "models/transcribe/transcript.h"

namespace duet::cli {

namespace {

const std::vector<std::string> kValued = {"--model", "--prompt", "--format", "--max-tokens",
                                          "--threads", "--device", "--ctx"};
const std::vector<std::string> kSwitches = {"--speculative", "--no-speculative"};

// Recordings longer than this get a line on stderr as each stage starts.
constexpr double kProgressSeconds = 30.0;

}  // namespace

int run_transcribe(const Argv& argv) {
    std::vector<std::string> files;
    const Args args(split_positionals(argv, kValued, files), kValued, kSwitches);
    if (files.empty()) throw UsageError{"give at least one FILE to transcribe"};
    const std::string format = args.text_or("--format", "text");
    if (format != "text" && format != "json") throw UsageError{"--format is '" + format + "', expected text or json"};
    if (args.has("--speculative") && args.has("--no-speculative")) {
        throw UsageError{"give at most one of --speculative and --no-speculative"};
    }
    const std::string dir = args.text("--model");

    transcribe::Transcriber transcriber = transcribe::Transcriber::load(dir);
    if (args.has("--speculative") && !transcriber.llm().has_draft()) {
        std::fprintf(stderr, "duet transcribe: %s has no draft module (mtp.*): decoding without speculation\n",
                     dir.c_str());
    }
    transcribe::TranscribeOptions options;
    options.instruction = args.text_or("--prompt", "");
    options.speculative = !args.has("--no-speculative");
    options.max_new_tokens = args.integer_or("--max-tokens", options.max_new_tokens, 1, 1 << 24);
    options.context = args.has("--ctx") ? context_flag(args) : 0;
    Runtime rt(args);
    transcriber.run_on_device(rt.perception_device());
    rt.note_cpu_part(kTranscribeCpuPart);
    const double rate = static_cast<double>(transcriber.perception().config().mel.sample_rate);

    for (const std::string& file : files) {
        const std::vector<float> wave = audio::read_speech_input(file, static_cast<int>(rate));
        options.progress = nullptr;
        if (static_cast<double>(wave.size()) / rate > kProgressSeconds) {
            options.progress = [&file](std::string_view line) {
                std::fprintf(stderr, "duet transcribe: %s: %.*s\n", file.c_str(), static_cast<int>(line.size()),
                             line.data());
            };
        }
        transcribe::Transcription result;
        try {
            result = transcriber.transcribe(wave, *rt.backend, &rt.pool, options);
        } catch (const Error& e) {
            fail(file, ": ", e.what());
        }
        if (format == "json") {
            std::printf("%s\n", json::dump(transcribe::transcript_json(file, result, rate)).c_str());
        } else {
            if (files.size() > 1) std::printf("== %s\n", file.c_str());
            std::fwrite(result.text.data(), 1, result.text.size(), stdout);
            std::fputc('\n', stdout);
        }
        std::fflush(stdout);
        if (options.progress) {
            std::fprintf(stderr, "duet transcribe: %s: %zu tokens in %.1f s (%.1f tokens/s)%s\n", file.c_str(),
                         result.ids.size(), result.seconds.decode, result.seconds.tokens_per_second,
                         result.finished ? "" : ", stopped at the token limit");
        }
    }
    return 0;
}

}  // namespace duet::cli
