// The streaming Sortformer's memory across windows (NeMo's arrival-order speaker cache + FIFO, as
// transformers' Nemotron3DiarizationSpeakerCache implements it). Each window's encoder input is
// [cache rows | FIFO rows | the window's projected frames]; attending to earlier frames of every
// speaker keeps each speaker in the same output slot from window to window.
//
// After a window, its frames join the FIFO; when the FIFO outgrows its length, its oldest frames move
// to the cache, and a cache longer than its length is compressed: the frames that best represent
// each speaker are kept, grouped by speaker slot and in arrival order within a slot, each slot's
// frames followed by the learned silence embedding.
#pragma once

#include <cstdint>
#include <vector>

namespace duet::transcribe {

struct SpeakerCacheSettings {
    int64_t cache_length = 0;
    int64_t fifo_length = 0;
    int64_t update_period = 0;             // at least this many frames move from the FIFO at once
    int64_t silence_frames_per_speaker = 1;
    double prediction_score_threshold = 0.25;
    double latest_frames_score_boost = 0.05;
    double min_positive_scores_rate = 0.5;
    double strong_boost_rate = 0.75;
    double weak_boost_rate = 1.5;
};

// ASSUMED: Transcribe's config names no speaker-cache sizes; these are Nemotron-3-Diarization's
// offline values (a cache of 33 rows per speaker, FIFO 40, update period 300) with transformers'
// scoring constants.
SpeakerCacheSettings transcribe_speaker_cache_settings(int64_t speakers);

class SpeakerCache {
public:
    SpeakerCache(const SpeakerCacheSettings& settings, int64_t width, int64_t speakers,
                 std::vector<float> silence_embedding);

    // Frames of the cache and the FIFO, in the order the next window's input starts with them.
    int64_t frames() const { return cache_frames() + fifo_frames(); }
    int64_t cache_frames() const { return static_cast<int64_t>(cache_rows_.size()) / width_; }
    int64_t fifo_frames() const { return static_cast<int64_t>(fifo_rows_.size()) / width_; }
    // [frames(), width]: the cache rows, then the FIFO rows.
    std::vector<float> rows() const;

    // After a window: `probs` [frames() + ..., speakers] are the window's 80 ms speaker
    // probabilities, its first frames() rows for the cache and FIFO rows it started with;
    // `new_rows` [n, width] and `new_probs` [n, speakers] are the window's own frames.
    void update(const std::vector<float>& probs, const float* new_rows, const float* new_probs, int64_t n);

private:
    void compress();
    std::vector<double> frame_scores() const;

    SpeakerCacheSettings s_;
    int64_t width_, speakers_;
    std::vector<float> silence_;
    std::vector<float> cache_rows_, cache_probs_;
    std::vector<float> fifo_rows_;
    bool compressed_ = false;
};

}  // namespace duet::transcribe
