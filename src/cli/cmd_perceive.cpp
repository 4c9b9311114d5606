// duet perceive: the checking form of Transcribe's audio path. Runs the perception on one recording
// and writes every stage as safetensors, with the meanings of the transcribe_audio_tiny fixture.
#include <cstdio>

#include "audio/speech_input.h"
#include "cli/commands.h"
#include "io/safetensors.h"
#include "models/transcribe/perception.h"

namespace duet::cli {

int run_perceive(const Argv& argv) {
    Args args(argv, {"--model", "--audio", "--out", "--threads", "--device"}, {});
    const std::string out_path = args.text("--out");
    transcribe::Perception perception = transcribe::Perception::load(args.text("--model"));
    const transcribe::PerceptionConfig& c = perception.config();
    const std::vector<float> wave =
        audio::read_speech_input(args.text("--audio"), static_cast<int>(c.mel.sample_rate));
    Runtime rt(args);
    perception.run_on_device(rt.perception_device());
    rt.note_cpu_part(kTranscribeCpuPart);
    const transcribe::PerceptionOutput out = perception.perceive(wave, &rt.pool);

    const int64_t frames = out.encoder_frames, speakers = c.sortformer.speakers;
    const int32_t mel_length = static_cast<int32_t>(out.mel_raw.valid);
    const int32_t tokens = static_cast<int32_t>(out.audio_tokens);
    auto f32 = [](const char* name, std::vector<int64_t> shape, const std::vector<float>& v) {
        return TensorToWrite{name, DType::F32, std::move(shape), v.data(), v.size() * sizeof(float)};
    };
    write_safetensors(out_path, {
        f32("mel_raw", {out.mel_raw.frames, out.mel_raw.n_mels}, out.mel_raw.values),
        f32("mel_normalized", {out.mel_normalized.frames, out.mel_normalized.n_mels}, out.mel_normalized.values),
        f32("asr_hidden", {frames, c.asr.width}, out.asr_hidden),
        f32("spk_probs_10ms", {frames * c.sortformer.upsample, speakers}, out.spk_probs_10ms),
        f32("spk_probs", {frames, speakers}, out.spk_probs),
        f32("spk_active", {frames, speakers}, out.spk_active),
        f32("fused", {frames, c.asr.width}, out.fused),
        f32("projected", {frames, c.output_dim}, out.projected),
        {"mel_length", DType::I32, {1}, &mel_length, sizeof mel_length},
        {"n_audio_tokens", DType::I32, {1}, &tokens, sizeof tokens},
    });
    std::fprintf(stderr, "%ld samples: %ld mel frames, %ld audio tokens in %ld window(s); wrote %s\n",
                 static_cast<long>(wave.size()), static_cast<long>(out.mel_raw.valid),
                 static_cast<long>(out.audio_tokens), static_cast<long>(out.windows), out_path.c_str());
    return 0;
}

}  // namespace duet::cli
