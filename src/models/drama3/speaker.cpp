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
      last_hidden_(backend.alloc(static_cast<size_t>(model.config().backbone.hidden))) {}

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
}

bool Speaker::step(const FrameSampling& sampling, std::span<int32_t> frame, FrameTrace* trace) {
    const Config& c = model_.config();
    require(!last_row_.empty(), "drama3: feed a prompt before drawing frames");
    require(room() >= 1, "drama3: the context is full (", state_.capacity(), " rows)");
    require(frame.size() == static_cast<size_t>(c.frame_width()), "drama3: frame of ", frame.size(),
            " values, expected ", c.frame_width());

    const std::vector<float> main_logits = model_.candidate_logits(backend_, last_hidden_.data(), 1);
    if (trace != nullptr) trace->main_logits = main_logits;
    const std::vector<int32_t> recent(recent_mains_.begin(), recent_mains_.end());
    const int32_t choice = sample_with_ras(main_logits, sampling.params, sampling.ras, recent,
                                           uniform_draw(sampling.params.seed, step_, kMainSlot),
                                           uniform_draw(sampling.params.seed, step_, kRasSlot),
                                           static_cast<int32_t>(c.semantic_count()));
    std::fill(frame.begin(), frame.end(), 0);
    if (choice == c.semantic_count()) {
        frame[0] = static_cast<int32_t>(c.eos);
        ++step_;
        return false;
    }
    frame[0] = static_cast<int32_t>(c.semantic_start + choice);
    frame[1] = choice;
    recent_mains_.push_back(choice);
    if (static_cast<int64_t>(recent_mains_.size()) > sampling.ras.window) recent_mains_.pop_front();

    if (trace != nullptr) trace->head_logits.clear();
    const CodePicker pick = [&](int64_t k, std::span<const float> logits) {
        if (trace != nullptr) trace->head_logits.insert(trace->head_logits.end(), logits.begin(), logits.end());
        return sample_index(logits, sampling.params, uniform_draw(sampling.params.seed, step_, kRasSlot + k));
    };
    model_.tower_step(backend_, state_, last_hidden_.data(), last_row_, frame, position() - 1, pick);

    feed_rows(frame.data(), 1, last_hidden_.data());
    last_row_.assign(frame.begin(), frame.end());
    ++step_;
    return true;
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
        const bool fed = speaker.step(sampling, frame, trace);
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
