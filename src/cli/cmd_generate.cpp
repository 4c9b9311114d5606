// duet generate: greedy continuation of a prompt of token ids. Only the new ids go to stdout.
#include <cstdio>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "models/generate.h"
#include "models/nemotron_h/speculative.h"
#include "models/registry.h"

namespace duet::cli {

std::string join_ids(const std::vector<int32_t>& ids) {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) line += ' ';
        line += std::to_string(ids[i]);
    }
    return line;
}

namespace {

// Speculative decoding with the checkpoint's draft module; nullopt when it has none (said once).
std::optional<GreedyOutput> generate_speculative(const CausalLM& model, Backend& backend, SequenceState& state,
                                                 const std::vector<int32_t>& prompt, int64_t count, bool stats,
                                                 const std::string& dir) {
    const auto* nemotron = dynamic_cast<const nemotron_h::Model*>(&model);
    if (nemotron == nullptr || !nemotron->has_draft()) {
        std::fprintf(stderr, "duet generate: %s has no draft module (mtp.*): decoding without speculation\n",
                     dir.c_str());
        return std::nullopt;
    }
    nemotron_h::MtpDrafter drafter(*nemotron);
    nemotron_h::SpeculativeStats counts;
    GreedyOutput out = nemotron_h::speculative_greedy(*nemotron, backend, dynamic_cast<nemotron_h::State&>(state),
                                                      prompt, count, drafter, &counts);
    if (stats) {
        std::fprintf(stderr, "speculative: %ld/%ld drafts kept (%.1f%%), %ld tokens in %ld passes (%.2f per pass)\n",
                     static_cast<long>(counts.drafts_kept), static_cast<long>(counts.rounds),
                     100.0 * counts.acceptance(), static_cast<long>(counts.tokens), static_cast<long>(counts.passes),
                     counts.tokens_per_pass());
    }
    return out;
}

}  // namespace

int run_generate(const Argv& argv) {
    Args args(argv, {"--model", "--ids", "-n", "--threads", "--device", "--ctx"}, {"--speculative", "--stats"});
    const std::vector<int32_t> prompt = parse_id_list(args.text("--ids"), "--ids");
    const int64_t count = args.integer_or("-n", 16, 0, 1 << 24);
    const std::string dir = args.text("--model");
    const std::unique_ptr<CausalLM> model = load_causal_lm(dir);
    Runtime rt(args);
    const std::unique_ptr<SequenceState> state = model->create_state(*rt.backend, context_flag(args));
    std::optional<GreedyOutput> out;
    if (args.has("--speculative")) {
        out = generate_speculative(*model, *rt.backend, *state, prompt, count, args.has("--stats"), dir);
    }
    if (!out) out = generate_greedy(*model, *rt.backend, *state, prompt, count);
    std::printf("%s\n", join_ids(out->ids).c_str());
    return 0;
}

}  // namespace duet::cli
