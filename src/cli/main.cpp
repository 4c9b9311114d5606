// duet: one binary for the whole job. `duet COMMAND [flags]`.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/commands.h"
#include "kernels/cpu/simd_level.h"

namespace {

const char* kUsage =
    "usage: duet COMMAND [flags]\n"
    "\n"
    "commands:\n"
    "  --version                            the version, the CPU kernels' vector width, the CUDA backend\n"
    "  COMMAND --help                       this text\n"
    "  demo     [--out duet-demo.wav]       a built-in tiny random Drama 3 and codec speak into a WAV (noise)\n"
    "  demo --generate                      a built-in tiny random Nemotron-H continues a prompt (noise)\n"
    "  demo --transcribe --perception DIR --tokenizer FILE [--dir OUT]\n"
    "                                       write a tiny random Transcribe directory for duet transcribe\n"
    "  info     --model DIR                 architecture, sizes, tensor count and bytes of a checkpoint\n"
    "  logits   --model DIR --ids 1,2,3 --out FILE.safetensors\n"
    "                                       prefill logits for the ids: tensor 'logits' [T, V] f32\n"
    "  generate --model DIR --ids 1,2,3 -n N [--speculative [--stats]]\n"
    "                                       greedy continuation: the N new ids on one line\n"
    "  bench    --arch nemotron_h --preset tiny|nano-8l|nano --random-weights | --model DIR [--no-speculative]\n"
    "           --arch qwen35_moe --preset tiny|a3b-8l|a3b --random-weights\n"
    "           --arch transcribe --preset tiny|real --random-weights [--audio-seconds S]\n"
    "           --arch fish_codec --preset tiny|real --random-weights [--seconds S] | --model DIR\n"
    "                                       prefill and decode speed as one JSON line\n"
    "           --arch product_chain --device cuda [--products N]\n"
    "                                       the cost of handing one product's result to the next\n"
    "  tokenize --tokenizer FILE (TEXT | --file PATH) | --decode IDS\n"
    "                                       encode text to ids on one line, or decode ids to the exact text\n"
    "  speak    --model DIR --text \"...\" --out OUT.wav|FRAMES.safetensors [--codec DIR]\n"
    "           [--reference-audio-codes FILE --reference-text \"...\"]\n"
    "           [--seed N --temperature T --top-k K --top-p P --max-frames N --chunk-bytes N]\n"
    "                                       Drama 3 text to speech: a 44.1 kHz WAV streamed through the\n"
    "                                       codec (beside the model, or --codec), or frames and codes\n"
    "           --model DIR --prompt-frames FILE --dump OUT.safetensors [--temperature 0 --max-frames N]\n"
    "                                       checking form: frames, main_logits, head_logits of each frame\n"
    "  perceive --model DIR --audio IN --out FILE.safetensors\n"
    "                                       Transcribe's audio path on a sound file (or a .safetensors\n"
    "                                       'waveform' [N] at 16 kHz): mel_raw, mel_normalized, asr_hidden,\n"
    "                                       spk_probs, fused, projected, n_audio_tokens\n"
    "  codec    decode --codec DIR --codes FILE --out OUT.wav|OUT.safetensors [--float]\n"
    "           encode --codec DIR --audio IN --out FILE.safetensors\n"
    "                                       Fish codec: codes [1 + n_codebooks, frames] <-> 44.1 kHz audio\n"
    "  transcribe --model DIR FILE... [--prompt \"...\"] [--format text|json] [--no-speculative]\n"
    "           [--max-tokens N (default 2048)]\n"
    "                                       speech to text with a Transcribe directory (perception, LLM,\n"
    "                                       tokenizer.json): each file's text, <spk:N> tags kept, or one\n"
    "                                       JSON line per file with speaker segments and timings; drafts\n"
    "                                       with the MTP module when the LLM has one; --ctx defaults to\n"
    "                                       the prompt plus --max-tokens\n"
    "\n"
    "common flags: --threads N (default: all hardware threads), --ctx N (state capacity, default 4096),\n"
    "              --device cpu|cuda (default cpu),\n"
    "              --codec-device cpu|cuda (speak, codec decode, bench: where the codec decodes; default: --device)\n";

// The usage's lines about one command (its first line starts "  COMMAND ", the lines after it that
// start further in belong to it too) and the common flags; empty for a command the usage does not name.
std::string usage_of(const std::string& command) {
    std::string out;
    bool inside = false;
    const std::string text = kUsage, first = "  " + command + " ";
    for (size_t begin = 0; begin < text.size();) {
        const size_t end = text.find('\n', begin);
        const std::string line = text.substr(begin, end - begin + 1);
        begin = end == std::string::npos ? text.size() : end + 1;
        if (line.rfind(first, 0) == 0) {
            inside = true;
        } else if (line.rfind("   ", 0) != 0) {
            inside = false;  // another command's first line, or a line of the usage's own
        }
        if (inside) out += line;
    }
    if (out.empty()) return out;
    const size_t common = text.find("common flags:");
    return "usage: duet " + command + " [flags]\n" + out + "\n" + text.substr(common) +
           "\n(duet --help describes every command)\n";
}

bool is_help_flag(const std::string& arg) { return arg == "--help" || arg == "-h"; }

// One line: what a bug report needs to say about the build and the machine it runs on.
void print_version() {
#ifdef DUET_HAVE_CUDA
    const char* cuda = "built in";
#else
    const char* cuda = "not built (no nvcc when configured)";
#endif
    std::printf("duet %s (CPU kernels: %s; CUDA backend: %s)\n", DUET_VERSION,
                std::string(duet::cpu::simd_level_name(duet::cpu::detected_simd_level())).c_str(), cuda);
}

}  // namespace

int main(int argc, char** argv) {
    using namespace duet::cli;
    if (argc < 2) {
        std::fputs(kUsage, stderr);
        return 2;
    }
    const std::string command = argv[1];
    const Argv rest(argv + 2, argv + argc);
    if (command == "--version" || command == "version") {
        print_version();
        return 0;
    }
    // `duet --help`: the whole usage; `duet COMMAND --help`: the command's part. On stdout, and success.
    if (is_help_flag(command) || command == "help") {
        std::fputs(kUsage, stdout);
        return 0;
    }
    if (std::any_of(rest.begin(), rest.end(), is_help_flag)) {
        const std::string usage = usage_of(command);
        std::fputs(usage.empty() ? kUsage : usage.c_str(), stdout);
        return 0;
    }
    try {
        if (command == "info") return run_info(rest);
        if (command == "logits") return run_logits(rest);
        if (command == "generate") return run_generate(rest);
        if (command == "bench") return run_bench(rest);
        if (command == "demo") return run_demo(rest);
        if (command == "tokenize") return run_tokenize(rest);
        if (command == "speak") return run_speak(rest);
        if (command == "perceive") return run_perceive(rest);
        if (command == "codec") return run_codec(rest);
        if (command == "transcribe") return run_transcribe(rest);
        throw UsageError{"unknown command '" + command + "'"};
    } catch (const UsageError& e) {
        const std::string usage = usage_of(command);
        std::fprintf(stderr, "duet %s: %s\n\n%s", command.c_str(), e.message.c_str(),
                     usage.empty() ? kUsage : usage.c_str());
        return 2;
    } catch (const duet::Error& e) {
        std::fprintf(stderr, "duet %s: error: %s\n", command.c_str(), e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "duet %s: error: out of memory\n", command.c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "duet %s: error: %s\n", command.c_str(), e.what());
        return 1;
    }
}
