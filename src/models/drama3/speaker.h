// The frame loop of one Drama 3 sequence. Per frame: candidate logits at the last fed row → the
// main token (with repetition-aware sampling) → the tower at that row fills the residual codes →
// the frame is fed back into the backbone. Prompt rows are fed with the tower teacher-forced over
// them, so its caches cover every row; a long text continues the same sequence turn after turn.
#pragma once

#include <cstdint>
#include <memory>
#include <functional>
#include <span>
#include <vector>

#include "models/drama3/model.h"
#include "sample/sampler.h"
#include "text/frame_rows.h"

namespace duet::drama3 {

// What a prompt's prefill computed, for checking against a reference.
struct PrefillTrace {
    std::vector<float> input_rows;    // [rows, hidden]
    std::vector<float> main_logits;   // [rows, candidates]
    std::vector<float> head_logits;   // [tower rows, num_codebooks − 1, codebook_size]
    std::vector<float> tower_mask;    // [tower rows]: 1 where the following row is audio
};

// The logits that chose one frame.
struct FrameTrace {
    std::vector<float> main_logits;  // [candidates]
    std::vector<float> head_logits;  // [num_codebooks − 1, codebook_size]; empty for the EOS frame
};

struct FrameSampling {
    SamplingParams params;
    RasParams ras;
};

class Speaker {
public:
    Speaker(const Model& model, Backend& backend, int64_t capacity);

    // Feeds rows: the prompt, or rows that continue the conversation after a spoken turn. Not while
    // a frame drawn ahead waits to be taken.
    void feed(const text::FrameRows& rows, PrefillTrace* trace = nullptr);
    // Draws the next frame into `frame` (width values). Returns false when it is the EOS frame,
    // which is not fed; otherwise the frame is fed and true returned. Needs room for one row.
    // `then_next`: the caller will ask for the next frame too, with the same sampling, so its step
    // may be issued before this frame is read back; where the backend queues its ops
    // (overlaps_frames) the host's turn between two frames is then hidden. A frame drawn ahead is
    // fed as it is drawn, and the next step() returns it.
    bool step(const FrameSampling& sampling, std::span<int32_t> frame, FrameTrace* trace = nullptr,
              bool then_next = false);
    // Whether a frame was drawn ahead and not yet returned by step().
    bool has_frame_ahead() const { return frame_ahead_; }
    // Whether drawing frames ahead hides anything here: the backend queues its ops.
    bool overlaps_frames() const { return backend_.queues_ops(); }

    int64_t position() const { return state_.position(); }
    int64_t room() const { return state_.room(); }
    int64_t frames_drawn() const { return step_; }
    int64_t frame_width() const { return model_.config().frame_width(); }
    const Model& model() const { return model_; }

private:
    // Backbone input rows for `rows`, run through the backbone; `input_copy` (optional) receives them.
    void feed_rows(const int32_t* rows, int64_t n, float* normed_out, std::vector<float>* input_copy = nullptr);

    // The frame step is recorded per sampling setting: a new one renews its key.
    void use_sampling(const FrameSampling& sampling);
    bool same_sampling(const FrameSampling& sampling) const;
    // Issues one frame's step, whose frame is fed into the backbone at `row` unless it is EOS.
    void issue_step(int64_t row);

    const Model& model_;
    Backend& backend_;
    State state_;
    Buffer last_hidden_;             // the backbone's final-normed output at the last fed row
    std::vector<int32_t> last_row_;  // that row; empty before anything is fed
    int64_t step_ = 0;               // frames drawn so far: the random draws' counter
    bool counters_current_ = false;  // the backend's counters are the host's (a fed frame advances both)
    bool frame_ahead_ = false;       // a step issued after the last frame returned, not yet read

    // What a frame step reads and writes in backend memory.
    // [step, backbone position, tower position, main choice, go on]: go on is 0 after the EOS frame,
    // which stops any step queued behind it until the host sets the counters again.
    Buffer counters_;
    Buffer frame_;         // the frame being drawn [width]
    Buffer previous_;      // the row fed before it [width], codes -1 for a non-audio row
    Buffer recent_;        // the RAS window: count, then the recent main choices
    Buffer main_logits_;   // [candidates]
    Buffer head_logits_;   // [num_codebooks − 1, codebook_size]
    Buffer input_row_;     // [hidden]
    std::shared_ptr<const void> frame_key_;
    FrameSampling recorded_sampling_{};
    bool sampling_set_ = false;
};

enum class StopReason { Eos, FrameBudget, Capacity, Listener };
const char* stop_reason_name(StopReason reason);

struct SpokenFrames {
    text::FrameRows frames;  // ends with the EOS frame when one was drawn
    StopReason reason = StopReason::Eos;
};

// Draws frames until EOS, `max_frames`, the state's capacity, or `on_frame` returning false.
// `on_frame` sees each frame as it is drawn (the EOS frame too), so audio can stream. Where the
// speaker overlaps frames, each is drawn ahead of the last one's read-back: a stop by `on_frame`
// then leaves one frame drawn ahead (Speaker::has_frame_ahead).
SpokenFrames speak_frames(Speaker& speaker, const FrameSampling& sampling, int64_t max_frames,
                          const std::function<bool(std::span<const int32_t>)>& on_frame = {},
                          std::vector<FrameTrace>* traces = nullptr);

}  // namespace duet::drama3
