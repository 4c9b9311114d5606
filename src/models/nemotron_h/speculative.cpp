#include "models/nemotron_h/speculative.h"

#include <chrono>

#include "base/error.h"
#include "sample/greedy.h"

namespace duet::nemotron_h {

int32_t MtpDrafter::extend(Backend& backend, State& state, std::span<const float> hidden,
                           std::span<const int32_t> next_ids, std::span<const EmbeddingPatch> patches) {
    const std::vector<float> logits = model_.draft_forward(backend, state, hidden, next_ids, false, patches);
    return argmax(logits.data(), model_.vocab());
}

std::vector<EmbeddingPatch> patches_on_followers(std::span<const EmbeddingPatch> patches, int64_t hidden) {
    std::vector<EmbeddingPatch> shifted;
    for (EmbeddingPatch p : patches) {
        if (p.first == 0 && p.count > 0) {
            p.rows += hidden;
            --p.count;
            ++p.first;
        }
        if (p.count > 0) shifted.push_back({p.first - 1, p.count, p.rows});
    }
    return shifted;
}

GreedyOutput greedy_decode(const Model& model, Backend& backend, State& state, const DecodeRequest& r) {
    require_generation_fits(r.prompt, r.max_new, state);
    GreedyOutput out;
    if (r.max_new == 0) return out;
    const std::vector<float> logits = model.forward(backend, state, r.prompt, false, {}, nullptr, r.patches);
    out.ids.push_back(argmax(logits.data(), model.vocab()));
    while (out.ids.back() != r.stop && static_cast<int64_t>(out.ids.size()) < r.max_new) {
        out.ids.push_back(model.next_greedy(backend, state, out.ids.back()));
    }
    return out;
}

GreedyOutput speculative_greedy(const Model& model, Backend& backend, State& state, std::span<const int32_t> prompt,
                                int64_t count, Drafter& drafter, SpeculativeStats* stats) {
    return speculative_greedy(model, backend, state, DecodeRequest{prompt, {}, count, -1}, drafter, stats);
}

GreedyOutput speculative_greedy(const Model& model, Backend& backend, State& state, const DecodeRequest& r,
                                Drafter& drafter, SpeculativeStats* stats) {
    const std::span<const int32_t> prompt = r.prompt;
    const int64_t count = r.max_new;
    // A verify pass feeds at most one token past the pending one, and only while two are still to
    // come, so speculation never needs more room than plain decoding.
    require_generation_fits(prompt, count, state);
    GreedyOutput out;
    SpeculativeStats local;
    SpeculativeStats& s = stats != nullptr ? *stats : local;
    s = {};
    if (count == 0) return out;
    const int64_t vocab = model.vocab();
    const int64_t hidden_size = model.config().hidden;
    bool stopped = false;
    auto emit = [&](int32_t id) {
        if (stopped) return;
        out.ids.push_back(id);
        ++s.tokens;
        stopped = id == r.stop;
    };

    std::vector<float> hidden;
    std::vector<float> logits = model.forward(backend, state, prompt, false, {}, &hidden, r.patches);
    ++s.passes;
    int32_t pending = argmax(logits.data(), vocab);  // emitted, not yet fed to the main model
    emit(pending);
    if (count == 1 || stopped) return out;

    // The drafter reads every prompt position, each paired with the token that followed it.
    std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
    next.push_back(pending);
    int32_t draft = drafter.extend(backend, state, hidden, next, patches_on_followers(r.patches, hidden_size));

    state.record_history(backend, 2);
    const auto decode_start = std::chrono::steady_clock::now();
    while (s.tokens < count && !stopped) {
        if (count - s.tokens == 1) {
            // One token left: the draft could not be emitted anyway.
            logits = model.forward(backend, state, std::span<const int32_t>(&pending, 1), false);
            ++s.passes;
            emit(argmax(logits.data(), vocab));
            break;
        }
        const int32_t pair[2] = {pending, draft};
        logits = model.forward(backend, state, pair, true, {}, &hidden);
        ++s.passes;
        ++s.rounds;
        const int32_t after_pending = argmax(logits.data(), vocab);
        if (after_pending == draft) {
            ++s.drafts_kept;
            const int32_t after_draft = argmax(logits.data() + vocab, vocab);
            emit(draft);
            emit(after_draft);
            pending = after_draft;
            if (s.tokens >= count || stopped) break;
            const int32_t followers[2] = {draft, after_draft};
            draft = drafter.extend(backend, state, hidden, followers, {});
        } else {
            state.roll_back(backend, 2, 1);
            emit(after_pending);
            pending = after_pending;
            draft = drafter.extend(backend, state, std::span<const float>(hidden.data(), hidden_size),
                                   std::span<const int32_t>(&pending, 1), {});
        }
    }
    state.record_history(backend, 0);
    s.decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - decode_start).count();
    return out;
}

}  // namespace duet::nemotron_h
