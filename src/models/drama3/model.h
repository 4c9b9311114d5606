// Drama 3: a Qwen3.5-MoE backbone over frame rows, a candidate head that scores the semantic
// tokens and EOS, and the codebook tower that turns the backbone's hidden state and the frame's
// semantic code into the residual codes 1..n−1, one tower layer per code after the shared ones.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/drama3/config.h"
#include "models/drama3/state.h"
#include "models/drama3/weights.h"
#include "models/qwen35_moe/model.h"
#include "models/tensor_set.h"

namespace duet::drama3 {

class Model {
public:
    static Model load(const std::string& dir);
    static Model from_tensors(const Config& config, std::shared_ptr<const TensorSet> tensors);

    const Config& config() const { return config_; }
    const qwen35_moe::Model& backbone() const { return backbone_; }
    const Weights& weights() const { return weights_; }
    std::vector<std::pair<std::string, std::string>> describe() const;
    size_t tensor_count() const { return backbone_.tensor_count(); }
    size_t tensor_bytes() const { return backbone_.tensor_bytes(); }
    // Weight bytes one frame reads: the backbone's decode step, the candidate head and the tower.
    size_t frame_weight_bytes() const;
    // State bytes one frame at `position` reads and writes: the backbone's and the tower caches' rows.
    size_t frame_state_bytes(int64_t position) const;

    State new_state(Backend& backend, int64_t capacity) const { return State(config_, backend, capacity); }

    bool is_audio_row(std::span<const int32_t> frame) const {
        return frame[0] >= config_.semantic_start && frame[0] <= config_.semantic_end;
    }
    // Throws naming the row and value for a main token outside the vocabulary or a code outside its codebook.
    void check_frames(std::span<const int32_t> frames, std::string_view what) const;

    // Backbone input rows out[n, hidden] for frames [n, width] (host).
    void input_rows(Backend& backend, const int32_t* frames, int64_t n, float* out) const;
    // Candidate logits (semantic tokens, then EOS) of final-normed rows [n, hidden], on the host.
    std::vector<float> candidate_logits(Backend& backend, const float* normed, int64_t n) const;

    // The tower over n rows at positions pos.., teacher-forced: row r's frame `in[r]` was fed at
    // pos + r, `hidden[r]` is the backbone's final-normed output there, `next[r]` is the following
    // frame, whose codes the layers read (zeroed where `next` is not an audio row). Fills the tower
    // caches; `head_logits` (host [n, num_codebooks − 1, codebook_size]) receives the heads when given.
    void tower_teacher_forced(Backend& backend, State& state, const float* hidden, const int32_t* in,
                              const int32_t* next, int64_t n, int64_t pos, float* head_logits = nullptr) const;
    // One frame's part of a recorded step, everything in backend memory: the candidate logits of
    // `normed` [1, hidden] into `logits` [candidates].
    void frame_candidates(Backend& backend, const float* normed, float* logits) const;
    // The tower for the frame being drawn at tower row `at`: `frame` holds its main token and code0,
    // `previous` the row fed before it (codes negative when it is no audio row); each head's code is
    // drawn into frame[2..] (draw slot draws.slot + k for code k ≥ 1) and its logits written to
    // head_logits [num_codebooks − 1, codebook_size].
    void tower_step(Backend& backend, State& state, const float* hidden, const int32_t* previous, int32_t* frame,
                    const StepPosition& at, const SamplingParams& params, const DrawCounter& draws,
                    float* head_logits) const;
    // The backbone input row [1, hidden] of an audio frame in backend memory (as input_rows).
    void audio_input_row(Backend& backend, const int32_t* frame, float* out) const;

private:
    Model(Config config, qwen35_moe::Model backbone, Weights weights)
        : config_(std::move(config)), backbone_(std::move(backbone)), weights_(std::move(weights)) {}
    // `device`: the device storage the tensors may be in (random weights made on a device), or null.
    static Model bind(const Config& config, const TensorLookup& lookup, const std::string& source, size_t count,
                      size_t bytes, std::shared_ptr<const void> keep_alive, DeviceTensorStorage* device = nullptr);

    struct TowerScratch;
    // What an audio row's summed embeddings are multiplied by.
    static float input_row_scale(int64_t backbone_codebooks);
    // Layer t over n rows: hin [n, dim] is replaced by the layer's normed output. `embed` gives the
    // tower input's embedding half its input, the layer's input embeddings [n, dim] (its tokens'
    // rows, at t == 0 plus the extra codes' rows): written into the product's x (scratch, also its
    // row_scratch), or for one token named as a table row. `hidden_ready_early`: hin was written
    // before the op before this layer (NormedProduct::ready_early). With `head`, its product of the
    // layer's normed output runs in the same op as the norm.
    void tower_layer(Backend& b, State& s, int64_t t, float* hin, const std::function<void(NormedProduct&)>& embed,
                     int64_t n, const StepPosition& at, TowerScratch& sc, bool hidden_ready_early = false,
                     const ProductOut* head = nullptr) const;
    // The code-embedding rows the backbone row left out, for `rows` in backend memory (see extra_code_ids).
    EmbeddingGather extra_codes_gather(const int32_t* rows) const;
    // The code-embedding ids of the codebooks the backbone row did not carry (extra(in)), [n, per-row].
    std::vector<int32_t> extra_code_ids(const int32_t* in, int64_t n) const;

    Config config_;
    qwen35_moe::Model backbone_;
    Weights weights_;
};

}  // namespace duet::drama3
