// duet generate: greedy continuation of a prompt of token ids. Only the new ids go to stdout.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "models/generate.h"
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

int run_generate(const Argv& argv) {
    Args args(argv, {"--model", "--ids", "-n", "--threads", "--ctx"}, {});
    const std::vector<int32_t> prompt = parse_id_list(args.text("--ids"), "--ids");
    const int64_t count = args.integer_or("-n", 16, 0, 1 << 24);
    const std::unique_ptr<CausalLM> model = load_causal_lm(args.text("--model"));
    Runtime rt(threads_flag(args));
    const std::unique_ptr<SequenceState> state = model->create_state(*rt.backend, context_flag(args));
    const GreedyOutput out = generate_greedy(*model, *rt.backend, *state, prompt, count);
    std::printf("%s\n", join_ids(out.ids).c_str());
    return 0;
}

}  // namespace duet::cli
