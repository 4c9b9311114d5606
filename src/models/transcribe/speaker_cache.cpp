#include "models/transcribe/speaker_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.h"

namespace duet::transcribe {

SpeakerCacheSettings transcribe_speaker_cache_settings(int64_t speakers) {
    SpeakerCacheSettings s;
    s.cache_length = 33 * speakers;
    s.fifo_length = 40;
    s.update_period = 300;
    return s;
}

SpeakerCache::SpeakerCache(const SpeakerCacheSettings& settings, int64_t width, int64_t speakers,
                           std::vector<float> silence_embedding)
    : s_(settings), width_(width), speakers_(speakers), silence_(std::move(silence_embedding)) {
    require(static_cast<int64_t>(silence_.size()) == width_, "speaker cache: silence embedding has ", silence_.size(),
            " values, expected ", width_);
}

std::vector<float> SpeakerCache::rows() const {
    std::vector<float> out = cache_rows_;
    out.insert(out.end(), fifo_rows_.begin(), fifo_rows_.end());
    return out;
}

void SpeakerCache::update(const std::vector<float>& probs, const float* new_rows, const float* new_probs, int64_t n) {
    const int64_t cached = cache_frames(), queued = fifo_frames();
    // The FIFO's probabilities are always this window's; the cache keeps the ones it was compressed
    // with, once it has been.
    std::vector<float> fifo_probs(probs.begin() + cached * speakers_, probs.begin() + (cached + queued) * speakers_);
    fifo_probs.insert(fifo_probs.end(), new_probs, new_probs + n * speakers_);
    if (!compressed_) cache_probs_.assign(probs.begin(), probs.begin() + cached * speakers_);
    fifo_rows_.insert(fifo_rows_.end(), new_rows, new_rows + n * width_);

    const int64_t total = queued + n;
    if (total <= s_.fifo_length) return;
    const int64_t pop = std::min(std::max(s_.update_period, total - s_.fifo_length), total);
    cache_rows_.insert(cache_rows_.end(), fifo_rows_.begin(), fifo_rows_.begin() + pop * width_);
    cache_probs_.insert(cache_probs_.end(), fifo_probs.begin(), fifo_probs.begin() + pop * speakers_);
    fifo_rows_.erase(fifo_rows_.begin(), fifo_rows_.begin() + pop * width_);
    if (cache_frames() > s_.cache_length) {
        compress();
        compressed_ = true;
    }
}

// Per frame and speaker: how clearly the frame is that speaker alone, −∞ for frames where the speaker
// is silent (and for a well-represented speaker's ambiguous frames).
std::vector<double> SpeakerCache::frame_scores() const {
    const int64_t n = cache_frames(), k = speakers_;
    const double floor = s_.prediction_score_threshold;
    const double per_speaker = static_cast<double>(s_.cache_length / k - s_.silence_frames_per_speaker);
    const auto min_positive = static_cast<int64_t>(std::floor(per_speaker * s_.min_positive_scores_rate));
    std::vector<double> scores(static_cast<size_t>(n * k));
    for (int64_t f = 0; f < n; ++f) {
        double others = 0.0;
        for (int64_t s = 0; s < k; ++s) others += std::log(std::max(1.0 - cache_probs_[f * k + s], floor));
        for (int64_t s = 0; s < k; ++s) {
            const double p = cache_probs_[f * k + s];
            scores[f * k + s] = std::log(std::max(p, floor)) - std::log(std::max(1.0 - p, floor)) + others - std::log(0.5);
        }
    }
    constexpr double kNever = -std::numeric_limits<double>::infinity();
    std::vector<int64_t> positives(static_cast<size_t>(k), 0);
    for (int64_t i = 0; i < n * k; ++i) {
        if (!(cache_probs_[i] > 0.5)) scores[i] = kNever;
        if (scores[i] > 0) ++positives[i % k];
    }
    for (int64_t i = 0; i < n * k; ++i) {
        if (cache_probs_[i] > 0.5 && !(scores[i] > 0) && positives[i % k] >= min_positive) scores[i] = kNever;
    }
    return scores;
}

namespace {

// The indices of the `count` largest values, ties to the lower index.
std::vector<int64_t> top_indices(const std::vector<double>& values, int64_t count) {
    std::vector<int64_t> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return values[a] > values[b]; });
    order.resize(static_cast<size_t>(std::min<int64_t>(count, static_cast<int64_t>(order.size()))));
    return order;
}

}  // namespace

void SpeakerCache::compress() {
    const int64_t n = cache_frames(), k = speakers_, keep = s_.cache_length;
    std::vector<double> scores = frame_scores();
    // The newest frames get a small edge; then each speaker's best frames a large one, so every
    // speaker keeps some frames however much another one talks.
    for (int64_t f = keep; f < n; ++f) {
        for (int64_t s = 0; s < k; ++s) scores[f * k + s] += s_.latest_frames_score_boost;
    }
    const double per_speaker = static_cast<double>(s_.cache_length / k - s_.silence_frames_per_speaker);
    const auto boost_top = [&](int64_t count, double add) {
        for (int64_t s = 0; s < k; ++s) {
            std::vector<double> column(static_cast<size_t>(n));
            for (int64_t f = 0; f < n; ++f) column[f] = scores[f * k + s];
            for (int64_t f : top_indices(column, count)) scores[f * k + s] += add;
        }
    };
    boost_top(static_cast<int64_t>(std::floor(per_speaker * s_.strong_boost_rate)), -2.0 * std::log(0.5));
    boost_top(static_cast<int64_t>(std::floor(per_speaker * s_.weak_boost_rate)), -std::log(0.5));

    // Speaker-major scores with silence rows (+∞, always chosen) after each speaker's frames.
    const int64_t scored = n + s_.silence_frames_per_speaker;
    std::vector<double> flat(static_cast<size_t>(k * scored), std::numeric_limits<double>::infinity());
    for (int64_t s = 0; s < k; ++s) {
        for (int64_t f = 0; f < n; ++f) flat[s * scored + f] = scores[f * k + s];
    }
    std::vector<int64_t> picked = top_indices(flat, keep);
    const int64_t silence = k * scored;  // sorts after every real pick
    for (int64_t& i : picked) {
        if (flat[i] == -std::numeric_limits<double>::infinity()) i = silence;
    }
    std::sort(picked.begin(), picked.end());

    std::vector<float> rows(static_cast<size_t>(keep * width_)), probs(static_cast<size_t>(keep * k), 0.0f);
    for (int64_t j = 0; j < keep; ++j) {
        const int64_t frame = picked[j] == silence ? n : std::min(picked[j] % scored, n);
        if (frame == n) {
            std::copy(silence_.begin(), silence_.end(), rows.begin() + j * width_);
        } else {
            std::copy_n(cache_rows_.begin() + frame * width_, width_, rows.begin() + j * width_);
            std::copy_n(cache_probs_.begin() + frame * k, k, probs.begin() + j * k);
        }
    }
    cache_rows_ = std::move(rows);
    cache_probs_ = std::move(probs);
}

}  // namespace duet::transcribe
