#include "models/drama3/speaker.h"

#include <algorithm>

#include "base/error.h"
#include "sample/philox.h"

namespace duet::drama3 {

namespace {

// Random-draw slots within a frame's step: the main token, its RAS redraw, then code k at 1 + k.
constexpr uint32_t kMainSlot = 0, kRasSlot = 1;

}  // namespace

Speaker::Speaker(const Model& model, Backend& backend, int64_t capacity)
    : model_(model),
      backend_(backend),
      state_(model.new_state(backend, capacity)),
      last_hidden_(backend.alloc(static_cast<size_t>(model.config().backbone.hidden))),
      counters_(backend.alloc(5)),
      frame_(backend.alloc(static_cast<size_t>(model.config().frame_width()))),
      previous_(backend.alloc(static_cast<size_t>(model.config().frame_width()))),
      main_logits_(backend.alloc(static_cast<size_t>(model.config().candidates()))),
      head_logits_(backend.alloc(static_cast<size_t>((model.config().tower.num_codebooks - 1) *
                                                     model.config().tower.codebook_size))),
      input_row_(backend.alloc(static_cast<size_t>(model.config().backbone.hidden))) {}

bool Speaker::same_sampling(const FrameSampling& sampling) const {
    const SamplingParams& p = sampling.params;
    const SamplingParams& q = recorded_sampling_.params;
    return sampling_set_ && p.temperature == q.temperature && p.top_k == q.top_k && p.top_p == q.top_p &&
           p.seed == q.seed && sampling.ras.window == recorded_sampling_.ras.window &&
           sampling.ras.min_repeats == recorded_sampling_.ras.min_repeats;
}

void Speaker::use_sampling(const FrameSampling& sampling) {
    if (same_sampling(sampling)) return;
    require(sampling.ras.window >= 0, "drama3: RAS window ", sampling.ras.window, " must not be negative");
    const int64_t held_before = sampling_set_ ? recorded_sampling_.ras.window : 0;
    if (!sampling_set_ || sampling.ras.window != held_before) {
        // The window keeps what it held, as far as the new size allows.
        std::vector<int32_t> old(static_cast<size_t>(1 + held_before), 0);
        if (sampling_set_) backend_.download_ints(old.data(), recent_.ints(), old.size());
        const int32_t held = std::min<int32_t>(old[0], static_cast<int32_t>(sampling.ras.window));
        std::vector<int32_t> fresh(static_cast<size_t>(1 + sampling.ras.window), 0);
        fresh[0] = held;
        std::copy(old.begin() + 1 + (old[0] - held), old.begin() + 1 + old[0], fresh.begin() + 1);
        recent_ = backend_.alloc(fresh.size());
        backend_.upload_ints(recent_.ints(), fresh.data(), fresh.size());
    }
    recorded_sampling_ = sampling;
    sampling_set_ = true;
    frame_key_ = std::make_shared<int>(0);
}

void Speaker::feed_rows(const int32_t* rows, int64_t n, float* normed_out, std::vector<float>* input_copy) {
    const int64_t hidden = model_.config().backbone.hidden;
    Buffer input = backend_.alloc(static_cast<size_t>(n * hidden));
    model_.input_rows(backend_, rows, n, input.data());
    if (input_copy != nullptr) {
        input_copy->resize(input.size());
        backend_.download(input_copy->data(), input.data(), input.size());
    }
    model_.backbone().forward_rows(backend_, state_.backbone(), input.data(), n, normed_out);
}

void Speaker::feed(const text::FrameRows& rows, PrefillTrace* trace) {
    const Config& c = model_.config();
    const int64_t width = c.frame_width(), hidden = c.backbone.hidden, m = static_cast<int64_t>(rows.count());
    require(rows.width() == width, "drama3: rows of width ", rows.width(), ", expected ", width);
    require(m > 0, "drama3: no rows to feed");
    require(!frame_ahead_, "drama3: a frame was drawn ahead and not yet taken; take it with step() before feeding "
                           "rows");
    require(m <= room(), "drama3: ", m, " rows do not fit the context (", room(), " of ", state_.capacity(),
            " rows left)");
    model_.check_frames(rows.values(), "prompt rows");

    // The tower runs over every fed row that has a successor: the previously last row (if any)
    // and all new rows but the last, each reading the row after it as `next`.
    const bool continuing = !last_row_.empty();
    const int64_t tower_rows = continuing ? m : m - 1;
    const int64_t first_tower_pos = continuing ? position() - 1 : 0;
    std::vector<int32_t> in;
    if (continuing) in = last_row_;
    in.insert(in.end(), rows.values().begin(), rows.values().end() - width);

    Buffer hiddens = backend_.alloc(static_cast<size_t>((m + 1) * hidden));
    float* new_hidden = hiddens.data() + hidden;
    if (continuing) backend_.copy(hiddens.data(), last_hidden_.data(), static_cast<size_t>(hidden));
    feed_rows(rows.values().data(), m, new_hidden, trace != nullptr ? &trace->input_rows : nullptr);
    if (trace != nullptr) trace->main_logits = model_.candidate_logits(backend_, new_hidden, m);

    const float* tower_hidden = continuing ? hiddens.data() : new_hidden;
    std::vector<float> head_logits;
    if (trace != nullptr) {
        head_logits.resize(static_cast<size_t>(tower_rows * (c.tower.num_codebooks - 1) * c.tower.codebook_size));
        trace->tower_mask.clear();
        for (int64_t r = 0; r < tower_rows; ++r) {
            const int32_t* following = rows.values().data() + (continuing ? r : r + 1) * width;
            trace->tower_mask.push_back(model_.is_audio_row({following, size_t(width)}) ? 1.0f : 0.0f);
        }
    }
    model_.tower_teacher_forced(backend_, state_, tower_hidden, in.data(),
                                rows.values().data() + (continuing ? 0 : width), tower_rows, first_tower_pos,
                                trace != nullptr ? head_logits.data() : nullptr);
    if (trace != nullptr) trace->head_logits = std::move(head_logits);

    backend_.copy(last_hidden_.data(), new_hidden + (m - 1) * hidden, static_cast<size_t>(hidden));
    const auto last = rows.row(rows.count() - 1);
    last_row_.assign(last.begin(), last.end());
    std::vector<int32_t> previous = last_row_;
    if (!model_.is_audio_row(previous)) std::fill(previous.begin() + 1, previous.end(), -1);
    backend_.upload_ints(previous_.ints(), previous.data(), previous.size());
    counters_current_ = false;
}

bool Speaker::step(const FrameSampling& sampling, std::span<int32_t> frame, FrameTrace* trace, bool then_next) {
    const Config& c = model_.config();
    require(!last_row_.empty(), "drama3: feed a prompt before drawing frames");
    require(room() >= 1, "drama3: the context is full (", state_.capacity(), " rows)");
    require(frame.size() == static_cast<size_t>(c.frame_width()), "drama3: frame of ", frame.size(),
            " values, expected ", c.frame_width());
    Backend& b = backend_;
    if (frame_ahead_) {
        require(same_sampling(sampling), "drama3: the frame drawn ahead was drawn with other sampling settings than "
                                         "this step asks for, expected the same");
    } else {
        use_sampling(sampling);
        issue_step(position());
    }
    // The next frame's step reads nothing the host writes, so it can be issued before this frame
    // is read back (not with a trace, which reads this frame's logits after it).
    const bool next_ahead = then_next && trace == nullptr && room() >= 2;
    b.read_ints_later(frame.data(), frame_.ints(), frame.size());
    if (next_ahead) issue_step(position() + 1);
    b.await_reads();
    frame_ahead_ = next_ahead;
    if (trace != nullptr) {
        trace->main_logits.resize(static_cast<size_t>(c.candidates()));
        b.download(trace->main_logits.data(), main_logits_.data(), trace->main_logits.size());
    }
    ++step_;
    if (frame[0] == c.eos) {  // EOS lies outside the semantic range (Config::validate)
        // Its step advanced no counter and left go_on 0, so a step issued behind it did nothing:
        // the next step sets the counters again.
        counters_current_ = false;
        frame_ahead_ = false;
        return false;
    }
    state_.backbone().advance(1);
    if (trace != nullptr) {
        trace->head_logits.resize(head_logits_.size());
        b.download(trace->head_logits.data(), head_logits_.data(), head_logits_.size());
    }
    last_row_.assign(frame.begin(), frame.end());
    return true;
}

void Speaker::issue_step(int64_t row) {
    const Config& c = model_.config();
    Backend& b = backend_;
    if (!counters_current_) {
        // go_on 1: the frame may start (the EOS frame leaves it 0).
        const int32_t counters[5] = {static_cast<int32_t>(step_), static_cast<int32_t>(row),
                                     static_cast<int32_t>(row - 1), 0, 1};
        b.upload_ints(counters_.ints(), counters, 5);
        counters_current_ = true;
    }
    const FrameSampling& sampling = recorded_sampling_;
    const int32_t* step_counter = counters_.ints();
    int32_t* choice_slot = counters_.ints() + 3;
    int32_t* go_on = counters_.ints() + 4;

    // The whole frame on the device, as one step: the main token and the frame it starts, then,
    // unless it is EOS, the residual codes, the frame's feed into the backbone and the counters
    // advanced for the next frame. Every op of the frame's start does nothing once go_on is 0.
    const int64_t width = c.frame_width();
    const FrameStart start{static_cast<int32_t>(c.semantic_start), static_cast<int32_t>(c.semantic_count()),
                           static_cast<int32_t>(c.eos)};
    const auto main_token = [&] {
        model_.frame_candidates(b, last_hidden_.data(), main_logits_.data());
        b.sample_with_ras(main_logits_.data(), c.candidates(), sampling.params, sampling.ras, recent_.ints(),
                          DrawCounter{sampling.params.seed, step_counter, kMainSlot}, start.end_choice, choice_slot,
                          go_on);
        b.start_frame(choice_slot, start, width, frame_.ints(), go_on, go_on);
        b.mark("frame head");
        return static_cast<const float*>(frame_.data());
    };
    const auto codes_and_feed = [&] {
        model_.tower_step(b, state_, last_hidden_.data(), previous_.ints(), frame_.ints(),
                          StepPosition{row - 1, counters_.ints() + 2, state_.capacity()}, sampling.params,
                          DrawCounter{sampling.params.seed, step_counter, kRasSlot}, head_logits_.data());
        model_.audio_input_row(b, frame_.ints(), input_row_.data());
        model_.backbone().step_row(b, state_.backbone(), input_row_.data(), last_hidden_.data(),
                                   StepPosition{row, counters_.ints() + 1, state_.capacity()});
        b.end_frame(frame_.ints(), width, previous_.ints(), counters_.ints(), 3);
        return static_cast<const float*>(frame_.data());
    };
    b.run_step_then_if(frame_key_, main_token, go_on, codes_and_feed);
}

const char* stop_reason_name(StopReason reason) {
    switch (reason) {
        case StopReason::Eos: return "eos";
        case StopReason::FrameBudget: return "frame budget";
        case StopReason::Capacity: return "context full";
        case StopReason::Listener: return "stopped by the listener";
    }
    return "unknown";
}

SpokenFrames speak_frames(Speaker& speaker, const FrameSampling& sampling, int64_t max_frames,
                          const std::function<bool(std::span<const int32_t>)>& on_frame,
                          std::vector<FrameTrace>* traces) {
    require(max_frames > 0, "drama3: the frame budget is ", max_frames, ", expected at least one frame");
    SpokenFrames out{text::FrameRows(static_cast<int>(speaker.frame_width() - 1)), StopReason::FrameBudget};
    std::vector<int32_t> frame(static_cast<size_t>(speaker.frame_width()));
    for (int64_t g = 0; g < max_frames; ++g) {
        if (speaker.room() < 1) {
            out.reason = StopReason::Capacity;
            break;
        }
        FrameTrace* trace = traces != nullptr ? &traces->emplace_back() : nullptr;
        const bool then_next = speaker.overlaps_frames() && g + 1 < max_frames;
        const bool fed = speaker.step(sampling, frame, trace, then_next);
        out.frames.push_row(frame);
        const bool go_on = !on_frame || on_frame(frame);
        if (!fed) {
            out.reason = StopReason::Eos;
            break;
        }
        if (!go_on) {
            out.reason = StopReason::Listener;
            break;
        }
    }
    return out;
}

}  // namespace duet::drama3
