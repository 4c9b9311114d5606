// The `duet` subcommands. Each takes the arguments after its name and returns the exit code.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "cli/args.h"
#include "models/fish_codec/codec.h"
#include "models/fish_codec/wav_stream.h"

namespace duet::transcribe {
class PerceptionDevice;
}

namespace duet::cli {

using Argv = std::vector<std::string>;

int run_info(const Argv& argv);
int run_logits(const Argv& argv);
int run_generate(const Argv& argv);
int run_bench(const Argv& argv);
int run_demo(const Argv& argv);
int run_tokenize(const Argv& argv);
int run_speak(const Argv& argv);
int run_perceive(const Argv& argv);
int run_codec(const Argv& argv);
int run_transcribe(const Argv& argv);

// The thread pool and backend every command computes with: --threads and --device (cpu or cuda).
struct Runtime {
    explicit Runtime(const Args& args);
    ThreadPool pool;
    std::unique_ptr<Backend> backend;

    // Says on stderr, when the backend is not the CPU, that `part` (the Fish codec's encoder,
    // Transcribe's audio path) still runs on the CPU's threads.
    void note_cpu_part(const char* part) const;
    // Says on stderr, when the model runs on a GPU and the codec decodes on the CPU, how to move it.
    void note_codec_device() const;

    // Where the Fish codec decodes: --codec-device cpu or cuda, by default where --device runs the model.
    std::string codec_device;

    // Where Transcribe's audio path runs its front end, products and encoders' layers: the GPU's form
    // with --device cuda, else null (the CPU's threads).
    std::shared_ptr<transcribe::PerceptionDevice> perception_device() const;

    // `codec`'s codes of mono samples at its rate ([codebooks, frames]), encoded on codec_device.
    std::vector<int32_t> codec_encode(const fish_codec::FishCodec& codec, std::span<const float> samples);

    // A stream decoder of `codec`'s frames on codec_device.
    std::unique_ptr<fish_codec::FrameDecoder> codec_decoder(const fish_codec::FishCodec& codec);
    // Frames a whole decode hands its decoder at a time: the CPU's bound on activation memory, or a
    // larger chunk that keeps a GPU busy.
    int64_t codec_chunk_frames() const;
    // How a WAV stream decodes: in the call where the codec and the model both run on the CPU and
    // share its threads; else on a thread of its own while the model makes the next frames.
    fish_codec::Decoding codec_decoding() const;
};

// What of Transcribe's audio path stays on the CPU under --device cuda (note_cpu_part).
inline constexpr const char* kTranscribeCpuPart =
    "the rest of Transcribe's audio path (the small steps between its products; the front end, the encoders' "
    "layers and every product run on the GPU)";

// --threads (0 = every hardware thread).
int threads_flag(const Args& args);
// --ctx: the state's capacity in tokens.
int64_t context_flag(const Args& args);

// Token ids separated by single spaces.
std::string join_ids(const std::vector<int32_t>& ids);

}  // namespace duet::cli
