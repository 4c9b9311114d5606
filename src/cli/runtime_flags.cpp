#include "cli/commands.h"

#include <cstdio>

#include "base/error.h"

#ifdef DUET_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_codec_decoder.h"
#include "backend/cuda/cuda_codec_encoder.h"
#include "backend/cuda/cuda_speech_encoder.h"
#endif

namespace duet::cli {

int threads_flag(const Args& args) { return static_cast<int>(args.integer_or("--threads", 0, 0, 1024)); }

int64_t context_flag(const Args& args) { return args.integer_or("--ctx", 4096, 1, 1 << 24); }

namespace {

// `device` as given to `flag` (cpu or cuda); cuda only where the CUDA part is built.
std::string checked_device(const char* flag, const std::string& device) {
    if (device == "cpu") return device;
    if (device == "cuda") {
#ifdef DUET_HAVE_CUDA
        return device;
#else
        fail(flag, " cuda: this duet was built without the CUDA part (no nvcc was found at build time)");
#endif
    }
    throw UsageError{std::string(flag) + " is '" + device + "', expected cpu or cuda"};
}

std::unique_ptr<Backend> backend_for(const std::string& device, ThreadPool& pool) {
    if (checked_device("--device", device) == "cuda") {
#ifdef DUET_HAVE_CUDA
        return make_cuda_backend();
#endif
    }
    return make_cpu_backend(&pool);
}

// Where the codec's decoder runs: --codec-device, else the model's --device.
std::string codec_device_for(const Args& args) {
    return checked_device("--codec-device", args.text_or("--codec-device", args.text_or("--device", "cpu")));
}

}  // namespace

Runtime::Runtime(const Args& args)
    : pool(threads_flag(args)),
      backend(backend_for(args.text_or("--device", "cpu"), pool)),
      codec_device(codec_device_for(args)) {}

void Runtime::note_cpu_part(const char* part) const {
    if (backend->name() == "cpu") return;
    std::fprintf(stderr, "note: %s runs on the CPU (%d threads); --device %.*s does not move it\n", part,
                 pool.size(), static_cast<int>(backend->name().size()), backend->name().data());
}

void Runtime::note_codec_device() const {
    if (backend->name() == "cpu" || codec_device != "cpu") return;
    std::fprintf(stderr, "note: the Fish codec decodes on the CPU (%d threads); --codec-device cuda decodes it on the GPU\n",
                 pool.size());
}

std::shared_ptr<transcribe::PerceptionDevice> Runtime::perception_device() const {
#ifdef DUET_HAVE_CUDA
    if (backend->name() == "cuda") return cuda::make_cuda_perception_device();
#endif
    return nullptr;
}

std::vector<int32_t> Runtime::codec_encode(const fish_codec::FishCodec& codec, std::span<const float> samples) {
#ifdef DUET_HAVE_CUDA
    if (codec_device == "cuda") return cuda::CudaCodecEncoder(codec).encode(samples);
#endif
    return codec.encode(samples, &pool);
}

std::unique_ptr<fish_codec::FrameDecoder> Runtime::codec_decoder(const fish_codec::FishCodec& codec) {
#ifdef DUET_HAVE_CUDA
    if (codec_device == "cuda") return cuda::make_cuda_codec_decoder(codec);
#endif
    return std::make_unique<fish_codec::StreamingDecoder>(codec, &pool);
}

fish_codec::Decoding Runtime::codec_decoding() const {
    const bool all_on_cpu = backend->name() == "cpu" && codec_device == "cpu";
    return all_on_cpu ? fish_codec::Decoding::InCall : fish_codec::Decoding::Background;
}

int64_t Runtime::codec_chunk_frames() const {
    return codec_device == "cpu" ? fish_codec::FishCodec::kDecodeChunkFrames : 32;
}

}  // namespace duet::cli
