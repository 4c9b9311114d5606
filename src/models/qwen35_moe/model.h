// Qwen3.5-MoE: a stack of layers, each a mixer (Gated DeltaNet in three layers of four, gated
// full attention in the fourth) and a softmax-routed MoE, both behind zero-centred RMSNorms:
// h += mixer(norm₁(h)); h += moe(norm₂(h)); then the final norm and the LM head. The forward pass
// is written once against the backend's ops.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/causal_lm.h"
#include "models/qwen35_moe/config.h"
#include "models/qwen35_moe/state.h"
#include "models/qwen35_moe/weights.h"
#include "models/tensor_set.h"

namespace duet::qwen35_moe {

// Prefill runs Gated DeltaNet in chunks of this many tokens, as the reference does.
constexpr int64_t kDeltaRuleChunk = 64;

class Model final : public CausalLM {
public:
    // Reads `dir`/config.json and the checkpoint beside it (single file or sharded).
    static Model load(const std::string& dir);
    // Binds weights held in memory (random weights for benchmarks).
    static Model from_tensors(const Config& config, std::shared_ptr<const TensorSet> tensors);

    // Binds the weights `lookup` finds (a larger model's checkpoint may hold this one); `source`
    // names it in errors, `keep_alive` owns the tensors' memory.
    static Model bind(const Config& config, const TensorLookup& lookup, const std::string& source,
                      size_t tensor_count, size_t tensor_bytes, std::shared_ptr<const void> keep_alive);

    const Config& config() const { return config_; }
    const Weights& weights() const { return weights_; }
    const Layout& layout() const { return layout_; }
    size_t tensor_count() const override { return tensor_count_; }
    size_t tensor_bytes() const override { return tensor_bytes_; }

    State new_state(Backend& backend, int64_t capacity) const { return State(config_, backend, capacity); }

    // Runs `ids` from the state's position and advances it. Gated DeltaNet uses the chunked form
    // for more than one token and the recurrence for one, unless `delta_rule_chunk` says otherwise
    // (0: always the recurrence). Throws, leaving the state untouched, for an id outside the
    // vocabulary or more tokens than the state has room for.
    std::vector<float> forward(Backend& backend, State& state, std::span<const int32_t> ids, bool all_logits,
                               const HiddenHook& hook = {}, int64_t delta_rule_chunk = kDeltaRuleChunk) const;

    // The same pass over input rows [n, hidden] in backend memory (embeddings, or a speech model's
    // frame rows) instead of ids: writes the final-normed hidden states to `normed` [n, hidden], which
    // may be `rows` itself. Throws, leaving the state untouched, for more rows than it has room for.
    void forward_rows(Backend& backend, State& state, const float* rows, int64_t n, float* normed,
                      const HiddenHook& hook = {}, int64_t delta_rule_chunk = kDeltaRuleChunk) const;

    // One input row [1, hidden] in backend memory at the position `at` (read from backend memory, so
    // a recorded step replays at the current one), final-normed into `normed`, as part of a step the
    // caller records: nothing is checked and the state's position is not advanced.
    void step_row(Backend& backend, State& state, const float* row, float* normed, const StepPosition& at) const;

    // CausalLM
    std::string arch() const override { return "qwen35_moe"; }
    int64_t vocab() const override { return config_.vocab; }
    std::vector<std::pair<std::string, std::string>> describe() const override;
    std::unique_ptr<SequenceState> create_state(Backend& backend, int64_t capacity) const override {
        return std::make_unique<State>(config_, backend, capacity);
    }
    std::vector<float> forward(Backend& backend, SequenceState& state, std::span<const int32_t> ids,
                               bool all_logits, const HiddenHook& hook = {}) const override;
    // The decode step's own greedy choice, made on the backend: only the token is read back.
    int32_t next_greedy(Backend& backend, SequenceState& state, int32_t id) const override;
    // Every dense matrix, the router, the shared expert and top-k experts per layer, one embedding
    // row and the LM head.
    size_t decode_weight_bytes() const override;
    // Each delta-rule state and conv ring read and written, each attention layer's cache rows read.
    size_t decode_state_bytes(int64_t position) const override;

private:
    void run_layers(Backend& backend, State& state, const float* rows, int64_t n, float* normed,
                    const StepPosition& at, const HiddenHook& hook, int64_t delta_rule_chunk) const;
    // One token at the state's position, as a step the backend may record and replay: leaves the
    // logits in the step's output and their greedy choice in its choice slot, and advances the state.
    void decode_step(Backend& backend, State& state, int32_t id) const;

    Model(Config config, Weights weights, Layout layout, size_t tensor_count, size_t tensor_bytes)
        : config_(std::move(config)), weights_(std::move(weights)), layout_(std::move(layout)),
          tensor_count_(tensor_count), tensor_bytes_(tensor_bytes) {}

    Config config_;
    Weights weights_;
    Layout layout_;
    size_t tensor_count_ = 0;
    size_t tensor_bytes_ = 0;
};

}  // namespace duet::qwen35_moe
