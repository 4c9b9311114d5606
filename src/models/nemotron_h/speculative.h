// Greedy-exact speculative decoding: a drafter proposes the next token, the main model checks the
// pending token and the draft in one batched pass, and the draft is kept only when the main model
// would have chosen it. Every emitted token is the main model's argmax; a rejected draft is undone by
// rolling the recurrent state back to the pending token exactly.
#pragma once

#include <cstdint>
#include <span>

#include "models/generate.h"
#include "models/nemotron_h/model.h"

namespace duet::nemotron_h {

class Drafter {
public:
    virtual ~Drafter() = default;
    // Extends the draft over newly verified positions: `hidden` [n, hidden] holds the main model's
    // final-normed hidden states there, `next_ids` the token that followed each. Returns the draft
    // for the token after the last of them.
    // `patches` replace the embeddings of some next ids (audio rows in a prompt).
    virtual int32_t extend(Backend& backend, State& state, std::span<const float> hidden,
                           std::span<const int32_t> next_ids, std::span<const EmbeddingPatch> patches) = 0;
};

// Drafts with the checkpoint's multi-token-prediction module.
class MtpDrafter final : public Drafter {
public:
    explicit MtpDrafter(const Model& model) : model_(model) {}
    int32_t extend(Backend& backend, State& state, std::span<const float> hidden,
                   std::span<const int32_t> next_ids, std::span<const EmbeddingPatch> patches) override;

private:
    const Model& model_;
};

struct SpeculativeStats {
    int64_t rounds = 0;       // verify passes that carried a draft
    int64_t drafts_kept = 0;  // of those, the drafts the main model agreed with
    int64_t passes = 0;       // main-model forward passes, the prefill included
    int64_t tokens = 0;       // tokens emitted
    double decode_seconds = 0.0;  // wall time after the prefill and the first draft
    double tokens_per_pass() const { return passes > 0 ? static_cast<double>(tokens) / passes : 0.0; }
    double acceptance() const { return rounds > 0 ? static_cast<double>(drafts_kept) / rounds : 0.0; }
};

// What a greedy run starts from and when it ends.
struct DecodeRequest {
    std::span<const int32_t> prompt;
    std::span<const EmbeddingPatch> patches;  // rows over some prompt embeddings
    int64_t max_new = 0;
    int32_t stop = -1;  // a token that ends the run (emitted, then nothing more)
};

// Continues `prompt` by `count` tokens, identical to generate_greedy's output.
GreedyOutput speculative_greedy(const Model& model, Backend& backend, State& state, std::span<const int32_t> prompt,
                                int64_t count, Drafter& drafter, SpeculativeStats* stats = nullptr);
// The same for a request with embedding patches and a stop token; identical to greedy_decode's output.
GreedyOutput speculative_greedy(const Model& model, Backend& backend, State& state, const DecodeRequest& request,
                                Drafter& drafter, SpeculativeStats* stats = nullptr);
// Plain greedy decoding of a request, token by token after the prefill.
GreedyOutput greedy_decode(const Model& model, Backend& backend, State& state, const DecodeRequest& request);

// The patches of a prompt as they fall on the ids after each prompt position (shifted by one; a
// row over the first position has no follower and is dropped).
std::vector<EmbeddingPatch> patches_on_followers(std::span<const EmbeddingPatch> patches, int64_t hidden);

}  // namespace duet::nemotron_h
