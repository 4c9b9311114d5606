// Nemotron-H: a stack of layers, each one mixer (Mamba-2, attention, MoE or MLP) behind its own
// RMSNorm, h = h + mixer(rmsnorm(h)); then the final norm and the LM head. The forward pass is
// written once against the backend's ops.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/causal_lm.h"
#include "models/nemotron_h/config.h"
#include "models/nemotron_h/state.h"
#include "models/nemotron_h/weights.h"
#include "models/tensor_set.h"

namespace duet::nemotron_h {

// Input rows that replace the token embeddings of `count` consecutive inputs from `first`
// (relative to the ids of the call): a speech model's audio rows placed over their placeholders.
struct EmbeddingPatch {
    int64_t first = 0;
    int64_t count = 0;
    const float* rows = nullptr;  // host [count, hidden]
};

class Model final : public CausalLM {
public:
    // Reads `dir`/config.json and the checkpoint beside it (single file or sharded).
    static Model load(const std::string& dir);
    // Binds weights held in memory (random weights for benchmarks and the demo).
    static Model from_tensors(const Config& config, std::shared_ptr<const TensorSet> tensors);

    const Config& config() const { return config_; }
    const Weights& weights() const { return weights_; }
    const std::string& layout() const { return layout_; }
    size_t tensor_count() const override { return tensor_count_; }
    size_t tensor_bytes() const override { return tensor_bytes_; }

    State new_state(Backend& backend, int64_t capacity) const {
        return State(config_, backend, capacity, has_draft());
    }
    // Whether the checkpoint carries the multi-token-prediction draft module.
    bool has_draft() const { return weights_.draft.has_value(); }

    // Runs `ids` through the stack from the state's position and advances it. Returns logits on
    // the host: [n, vocab] when all_logits, else [1, vocab] for the last token. Throws, leaving the
    // state untouched, for an id outside the vocabulary or more tokens than the state has room for.
    // When `final_hidden` is given it receives the final-normed hidden states [n, hidden] (what the
    // draft module reads). When the state records history, the pass records it.
    // `patches` replace the embeddings of some inputs with given rows.
    std::vector<float> forward(Backend& backend, State& state, std::span<const int32_t> ids, bool all_logits,
                               const HiddenHook& hook = {}, std::vector<float>* final_hidden = nullptr,
                               std::span<const EmbeddingPatch> patches = {}) const;

    // The draft module over n positions from the state's draft position: `hidden` [n, hidden] holds
    // the main model's final-normed hidden states there, `next_ids` the token that followed each.
    // Advances the draft cache; returns host logits ([n, vocab] or [1, vocab]) that predict the token
    // after each next id.
    // `patches` replace the embeddings of some next ids, as in forward.
    std::vector<float> draft_forward(Backend& backend, State& state, std::span<const float> hidden,
                                     std::span<const int32_t> next_ids, bool all_logits,
                                     std::span<const EmbeddingPatch> patches = {}) const;

    // CausalLM
    std::string arch() const override { return "nemotron_h"; }
    int64_t vocab() const override { return config_.vocab; }
    std::vector<std::pair<std::string, std::string>> describe() const override;
    std::unique_ptr<SequenceState> create_state(Backend& backend, int64_t capacity) const override {
        return std::make_unique<State>(config_, backend, capacity, has_draft());
    }
    std::vector<float> forward(Backend& backend, SequenceState& state, std::span<const int32_t> ids,
                               bool all_logits, const HiddenHook& hook = {}) const override;
    // The decode step's own greedy choice, made on the backend: only the token is read back.
    int32_t next_greedy(Backend& backend, SequenceState& state, int32_t id) const override;

    struct Scratch;

    // Weight bytes one decode token reads: every dense matrix, top-k experts per MoE layer, one
    // embedding row and the LM head.
    size_t decode_weight_bytes() const override;
    // Each Mamba layer's SSM state and conv ring read and written, each attention layer's cache rows read.
    size_t decode_state_bytes(int64_t position) const override;

private:
    Model(Config config, Weights weights, std::string layout, size_t tensor_count, size_t tensor_bytes)
        : config_(std::move(config)), weights_(std::move(weights)), layout_(std::move(layout)),
          tensor_count_(tensor_count), tensor_bytes_(tensor_bytes) {}

    // The layers and the final norm over sc.h [n, hidden] from position `at`, into sc.normed;
    // `report` (optional) receives the hidden states as a HiddenHook does.
    void run_layers(Backend& backend, State& state, const StepPosition& at, int64_t n, Scratch& sc,
                    const std::function<void(int64_t, const float*)>& report) const;
    // One token at the state's position, as a step the backend may record and replay: leaves the
    // logits in the step's output and their greedy choice in its choice slot, and advances the state.
    void decode_step(Backend& backend, State& state, int32_t id) const;

    // Writes the patches' rows over the embeddings `h` [n, hidden] of this call's inputs.
    void apply_patches(Backend& backend, float* h, int64_t n, std::span<const EmbeddingPatch> patches) const;

    static Model bind(const Config& config, const TensorLookup& lookup, const std::vector<const TensorEntry*>& all,
                      const std::string& source, size_t tensor_bytes, std::shared_ptr<const void> keep_alive);

    Config config_;
    Weights weights_;
    std::string layout_;
    size_t tensor_count_ = 0;
    size_t tensor_bytes_ = 0;
};

}  // namespace duet::nemotron_h
