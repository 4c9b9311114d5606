#include "models/transcribe/long_audio.h"

#include <algorithm>

#include "models/transcribe/speaker_cache.h"

namespace duet::transcribe {

EncodingPlan plan_windows(const WindowConfig& config, int64_t audio_tokens, int64_t frames) {
    EncodingPlan plan;
    plan.frames = frames;
    if (audio_tokens <= config.window) {
        plan.windows.push_back({0, frames, 0, frames});
        return plan;
    }
    const int64_t count = (audio_tokens + config.window - 1) / config.window;
    for (int64_t i = 0; i < count; ++i) {
        EncoderWindow w;
        w.begin = i * config.window;
        w.end = i + 1 == count ? frames : w.begin + config.window;
        w.context_begin = std::max<int64_t>(0, w.begin - config.left_context);
        w.context_end = std::min(frames, w.end + config.right_context);
        plan.windows.push_back(w);
    }
    return plan;
}

namespace {

// The mel rows of a window's frames with context, and how many of them hold audio.
struct MelSlice {
    const float* rows;
    int64_t frames;
    int64_t valid;
};

MelSlice mel_slice(const audio::LogMel& mel, const EncoderWindow& w, int64_t stacking) {
    const int64_t first = w.context_begin * stacking;
    const int64_t frames = std::min(w.context_end * stacking, mel.frames) - first;
    return {mel.row(first), frames, std::clamp<int64_t>(mel.valid - first, 0, frames)};
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::vector<float> encode_asr_branch(const PerceptionConfig& c, const EncoderWeights& weights,
                                     const audio::LogMel& normalized, const EncodingPlan& plan, ThreadPool* pool,
                                     PerceptionDevice* device) {
    const int64_t width = c.asr.width;
    std::vector<float> states(static_cast<size_t>(plan.frames * width));
    for (const EncoderWindow& w : plan.windows) {
        const MelSlice slice = mel_slice(normalized, w, c.asr.stacking);
        const std::vector<float> encoded = encode(c.asr, weights, slice.rows, slice.frames, slice.valid, pool, device);
        std::copy(encoded.begin() + (w.begin - w.context_begin) * width,
                  encoded.begin() + (w.end - w.context_begin) * width, states.begin() + w.begin * width);
    }
    return states;
}

std::vector<float> speaker_branch_probs_10ms(const PerceptionConfig& c, const EncoderWeights& encoder,
                                             const SortformerHeadWeights& head, const audio::LogMel& raw,
                                             const EncodingPlan& plan, ThreadPool* pool, PerceptionDevice* device) {
    const EncoderConfig& e = c.speaker;
    const int64_t width = e.width, speakers = c.sortformer.speakers, r = c.sortformer.upsample;
    const int64_t audio_tokens = ceil_div(raw.valid, e.stacking);
    std::vector<float> probs_10ms(static_cast<size_t>(plan.frames * r * speakers), 0.0f);
    SpeakerCache cache(transcribe_speaker_cache_settings(speakers), width, speakers, head.silence_embedding);
    for (const EncoderWindow& w : plan.windows) {
        const MelSlice slice = mel_slice(raw, w, e.stacking);
        const std::vector<float> projected =
            stack_and_project(e, encoder, slice.rows, slice.frames, slice.valid, pool, device);
        const int64_t window_frames = w.context_end - w.context_begin;
        // The window's input: the cache and FIFO frames, then its own frames.
        const int64_t carried = cache.frames();
        std::vector<float> packed = cache.rows();
        packed.insert(packed.end(), projected.begin(), projected.end());
        const int64_t n = carried + window_frames;
        const int64_t keys = carried + ceil_div(slice.valid, e.stacking);
        encode_projected(e, encoder, packed, n, keys, pool, device);
        const std::vector<float> probs =
            sortformer_probs_10ms(c.sortformer, head, packed.data(), n, keys, pool, device);

        const int64_t own = carried + (w.begin - w.context_begin);  // first produced frame in `packed`
        std::copy(probs.begin() + own * r * speakers, probs.begin() + (own + w.end - w.begin) * r * speakers,
                  probs_10ms.begin() + w.begin * r * speakers);
        if (w.end == plan.frames) break;  // the last window: nothing to carry
        const std::vector<float> pooled = average_per_frame(c.sortformer, probs, n);
        const int64_t kept = std::min(w.end, audio_tokens) - w.begin;
        cache.update(pooled, projected.data() + (w.begin - w.context_begin) * width, pooled.data() + own * speakers,
                     kept);
    }
    std::fill(probs_10ms.begin() + std::min(audio_tokens, plan.frames) * r * speakers, probs_10ms.end(), 0.0f);
    return probs_10ms;
}

}  // namespace duet::transcribe
