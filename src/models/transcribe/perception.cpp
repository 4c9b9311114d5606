#include "models/transcribe/perception.h"

#include <chrono>
#include <filesystem>

#include "base/error.h"
#include "io/safetensors.h"
#include "models/transcribe/long_audio.h"

namespace duet::transcribe {

namespace {

// A 1-D view of a tensor that may be stored with leading unit dimensions (fb is [1, n_mels, bins]).
std::vector<float> optional_vector(WeightBinder& binder, const std::string& name, std::vector<int64_t> shape) {
    return binder.has(name) ? binder.vector({name}, shape) : std::vector<float>{};
}

using Clock = std::chrono::steady_clock;

// Seconds since `start`, and restarts it.
double lap(Clock::time_point& start) {
    const Clock::time_point now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - start).count();
    start = now;
    return seconds;
}

}  // namespace

Perception::Perception(PerceptionConfig config, PerceptionWeights weights, size_t tensor_bytes)
    : config_(std::move(config)), weights_(std::move(weights)),
      front_end_(config_.mel, weights_.window, weights_.filterbank), tensor_bytes_(tensor_bytes) {}

Perception Perception::load(const std::string& dir) {
    const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
    require(std::filesystem::exists(config_path), dir, ": no config.json (expected a model directory)");
    PerceptionConfig config = load_perception_config(config_path);
    auto checkpoint = std::make_shared<Checkpoint>(Checkpoint::open(dir));
    const Checkpoint* ck = checkpoint.get();
    return bind(config, [ck](std::string_view name) { return ck->find(name); }, dir, ck->total_bytes(), checkpoint);
}

Perception Perception::from_tensors(const PerceptionConfig& config, std::shared_ptr<const TensorSet> tensors) {
    const TensorSet* set = tensors.get();
    return bind(config, [set](std::string_view name) { return set->find(name); }, "random weights",
                set->total_bytes(), tensors);
}

Perception Perception::bind(const PerceptionConfig& c, const TensorLookup& lookup, const std::string& source,
                            size_t tensor_bytes, std::shared_ptr<const void> keep_alive) {
    WeightBinder binder(lookup, source);
    PerceptionWeights w;
    const std::string pre = kPreprocessorPrefix;
    w.window = optional_vector(binder, pre + "window", {c.mel.win_length});
    w.filterbank = optional_vector(binder, pre + "fb", {c.mel.n_mels, c.mel.n_fft / 2 + 1});
    w.asr = bind_encoder(c.asr, binder, kAsrEncoderPrefix);
    w.speaker = bind_encoder(c.speaker, binder, kSpeakerEncoderPrefix);
    w.head = bind_sortformer_head(c.sortformer, c.speaker.width, binder, kSortformerPrefix);
    w.fusion.asr_norm = bind_layer_norm(binder, kAsrNormName, c.asr.width);
    w.fusion.diar_norm = bind_layer_norm(binder, kDiarNormName, c.sortformer.speakers);
    w.fusion.kernel = speaker_kernel(c.sortformer.speakers, c.asr.width, c.fusion);
    w.proj = bind_linear(binder, kProjectorName, c.output_dim, c.asr.width, true);
    binder.finish();
    w.storage = binder.take_storage();
    w.storage.push_back(std::move(keep_alive));
    return Perception(c, std::move(w), tensor_bytes);
}

PerceptionOutput Perception::perceive(const std::vector<float>& waveform_16k, ThreadPool* pool) const {
    const PerceptionConfig& c = config_;
    PerceptionOutput out;
    Clock::time_point start = Clock::now();
    if (device_ != nullptr) {
        audio::LogMelForms mel = device_->log_mel(front_end_, waveform_16k);
        out.mel_raw = std::move(mel.raw);
        out.mel_normalized = std::move(mel.normalized);
    } else {
        out.mel_raw = front_end_.compute(waveform_16k, pool);
        out.mel_normalized = audio::normalize_per_feature(out.mel_raw);
    }
    out.encoder_frames = (out.mel_raw.frames + c.asr.stacking - 1) / c.asr.stacking;
    out.audio_tokens = audio_tokens(static_cast<int64_t>(waveform_16k.size()));
    out.output_dim = c.output_dim;
    out.seconds.front_end = lap(start);

    const EncodingPlan plan = plan_windows(c.windows, out.audio_tokens, out.encoder_frames);
    out.windows = static_cast<int64_t>(plan.windows.size());
    out.asr_hidden = encode_asr_branch(c, weights_.asr, out.mel_normalized, plan, pool, device_.get());
    out.seconds.asr_encoder = lap(start);
    out.spk_probs_10ms = speaker_branch_probs_10ms(c, weights_.speaker, weights_.head, out.mel_raw, plan, pool,
                                                  device_.get());
    out.spk_probs = average_per_frame(c.sortformer, out.spk_probs_10ms, out.encoder_frames);
    out.spk_active = speaker_activity(c.sortformer, out.spk_probs);
    out.seconds.speaker_branch = lap(start);

    out.fused = fuse_speakers(weights_.fusion, c.fusion, out.asr_hidden.data(), out.spk_active.data(),
                              out.encoder_frames, c.asr.width, c.sortformer.speakers, c.asr.norm_eps);
    out.projected.resize(static_cast<size_t>(out.encoder_frames * c.output_dim));
    linear(weights_.proj, out.fused.data(), out.encoder_frames, out.projected.data(), pool, device_.get());
    out.seconds.fusion = lap(start);
    return out;
}

}  // namespace duet::transcribe
