// Transcribe's window-by-window encoding of long audio (tiny random model): the windows cover every
// encoder frame once, long audio gives the formula's number of audio tokens, audio of one window
// equals the plain single-pass encoding, and the speaker cache keeps its size and arrival order.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/thread_pool.h"
#include "kernel_test_support.h"
#include "models/transcribe/long_audio.h"
#include "models/transcribe/perception.h"
#include "models/transcribe/presets.h"
#include "models/transcribe/speaker_cache.h"
#include "text/transcribe_prompt.h"

namespace duet::transcribe {
namespace {

using duet::testing::bit_identical;
using duet::testing::random_values;

const Perception& tiny_perception() {
    static const Perception perception = [] {
        const PerceptionConfig config = perception_preset("tiny");
        return Perception::from_tensors(config, make_random_perception_weights(config, 5, nullptr));
    }();
    return perception;
}

// Noise with a slowly changing loudness, so frames differ from one another.
std::vector<float> test_audio(int64_t samples, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> wave = random_values(rng, samples, -0.3f, 0.3f);
    for (int64_t i = 0; i < samples; ++i) wave[i] *= 0.6f + 0.4f * std::sin(static_cast<float>(i) * 1e-4f);
    return wave;
}

TEST(TranscribeLongAudio, WindowsCoverEveryFrameOnce) {
    const WindowConfig config;  // 500 frames, 50 of context each side
    const EncodingPlan plan = plan_windows(config, 1201, 1203);
    ASSERT_EQ(plan.windows.size(), 3u);
    int64_t next = 0;
    for (const EncoderWindow& w : plan.windows) {
        EXPECT_EQ(w.begin, next);
        EXPECT_EQ(w.context_begin, std::max<int64_t>(0, w.begin - 50));
        EXPECT_EQ(w.context_end, std::min<int64_t>(1203, w.end + 50));
        next = w.end;
    }
    EXPECT_EQ(next, 1203);
    EXPECT_EQ(plan_windows(config, 500, 502).windows.size(), 1u);
}

TEST(TranscribeLongAudio, TokenCountFollowsTheFormula) {
    const Perception& p = tiny_perception();
    for (int64_t samples : {320, 1279, 1280, 1281, 36877, 640000, 640001, 1600000}) {
        EXPECT_EQ(p.audio_tokens(samples), ((samples / 160) + 7) / 8) << samples << " samples";
        // The prompt builder expands <|audio|> by the same count.
        EXPECT_EQ(p.audio_tokens(samples), static_cast<int64_t>(text::transcribe_audio_tokens(samples)));
    }
}

TEST(TranscribeLongAudio, LongAudioGivesTheFormulasTokens) {
    const Perception& p = tiny_perception();
    ThreadPool pool(2);
    const int64_t samples = 16000 * 95 + 123;  // 95 s: three windows
    const PerceptionOutput out = p.perceive(test_audio(samples, 1), &pool);
    EXPECT_EQ(out.windows, 3);
    EXPECT_EQ(out.audio_tokens, ((samples / 160) + 7) / 8);
    EXPECT_EQ(out.encoder_frames, out.mel_raw.frames / 8);
    EXPECT_EQ(out.projected.size(), static_cast<size_t>(out.encoder_frames * p.config().output_dim));
    EXPECT_EQ(out.audio_embeddings().size(), static_cast<size_t>(out.audio_tokens * p.config().output_dim));
    for (float v : out.projected) ASSERT_TRUE(std::isfinite(v));
    // Every valid frame has speaker probabilities from its window; padding frames have none.
    const int64_t speakers = p.config().sortformer.speakers;
    for (int64_t t = 0; t < out.encoder_frames; ++t) {
        float sum = 0.0f;
        for (int64_t k = 0; k < speakers; ++k) sum += out.spk_probs[t * speakers + k];
        if (t < out.audio_tokens) {
            EXPECT_GT(sum, 0.0f) << "frame " << t;
        } else {
            EXPECT_EQ(sum, 0.0f) << "frame " << t;
        }
    }
}

TEST(TranscribeLongAudio, OneWindowOfAudioEqualsTheSinglePass) {
    const Perception& p = tiny_perception();
    const PerceptionConfig& c = p.config();
    ThreadPool pool(2);
    const PerceptionOutput out = p.perceive(test_audio(16000 * 40, 2), &pool);  // 40 s: exactly 500 tokens
    EXPECT_EQ(out.audio_tokens, 500);
    EXPECT_EQ(out.windows, 1);

    const audio::LogMel& raw = out.mel_raw;
    const std::vector<float> asr = encode(c.asr, p.weights().asr, out.mel_normalized.values.data(),
                                          out.mel_normalized.frames, out.mel_normalized.valid, &pool);
    EXPECT_TRUE(bit_identical(out.asr_hidden, asr));
    const std::vector<float> speaker = encode(c.speaker, p.weights().speaker, raw.values.data(), raw.frames, raw.valid,
                                              &pool);
    const std::vector<float> probs = sortformer_probs_10ms(c.sortformer, p.weights().head, speaker.data(),
                                                           out.encoder_frames, out.audio_tokens, &pool);
    EXPECT_TRUE(bit_identical(out.spk_probs_10ms, probs));
}

TEST(TranscribeLongAudio, SpeakerCacheKeepsItsSizeAndArrivalOrder) {
    const int64_t speakers = 4;
    const SpeakerCacheSettings settings = transcribe_speaker_cache_settings(speakers);
    // One-value rows holding the frame's arrival index; silence is −1.
    SpeakerCache cache(settings, 1, speakers, {-1.0f});
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    int64_t arrived = 0;
    for (int window = 0; window < 3; ++window) {
        const int64_t n = 500;
        std::vector<float> rows(n), probs(static_cast<size_t>((cache.frames() + n) * speakers));
        for (int64_t f = 0; f < n; ++f) rows[f] = static_cast<float>(arrived + f);
        for (float& v : probs) v = unit(rng);
        const std::vector<float> own(probs.end() - n * speakers, probs.end());
        cache.update(probs, rows.data(), own.data(), n);
        arrived += n;
        EXPECT_EQ(cache.fifo_frames(), settings.fifo_length);
        EXPECT_EQ(cache.cache_frames(), settings.cache_length);
    }
    // The cache is grouped by speaker slot: each slot's frames in arrival order, closed by its
    // silence row (−1).
    const std::vector<float> kept = cache.rows();
    float last = -1.0f;
    int64_t silence_rows = 0;
    for (int64_t i = 0; i < cache.cache_frames(); ++i) {
        if (kept[i] < 0.0f) {
            ++silence_rows;
            last = -1.0f;
            continue;
        }
        EXPECT_GT(kept[i], last) << "row " << i;
        last = kept[i];
    }
    EXPECT_GE(silence_rows, speakers);
    // The FIFO holds the newest frames in order.
    for (int64_t i = 0; i < cache.fifo_frames(); ++i) {
        EXPECT_EQ(kept[cache.cache_frames() + i], static_cast<float>(arrived - settings.fifo_length + i));
    }
}

}  // namespace
}  // namespace duet::transcribe
