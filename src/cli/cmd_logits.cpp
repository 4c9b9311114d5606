// duet logits: the prefill logits of a prompt, written as safetensors for comparison with other
// implementations.
#include <cstdio>

#include "cli/commands.h"
#include "io/safetensors.h"
#include "models/registry.h"

namespace duet::cli {

int run_logits(const Argv& argv) {
    Args args(argv, {"--model", "--ids", "--out", "--threads", "--device", "--ctx"}, {});
    const std::vector<int32_t> ids = parse_id_list(args.text("--ids"), "--ids");
    const std::string out_path = args.text("--out");
    const std::unique_ptr<CausalLM> model = load_causal_lm(args.text("--model"));
    Runtime rt(args);
    const std::unique_ptr<SequenceState> state = model->create_state(*rt.backend, context_flag(args));
    const std::vector<float> logits = model->forward(*rt.backend, *state, ids, true);
    const int64_t t = static_cast<int64_t>(ids.size());
    write_safetensors(out_path, {{"logits", DType::F32, {t, model->vocab()}, logits.data(),
                                  logits.size() * sizeof(float)}});
    std::fprintf(stderr, "wrote logits [%ld, %ld] to %s\n", static_cast<long>(t),
                 static_cast<long>(model->vocab()), out_path.c_str());
    return 0;
}

}  // namespace duet::cli
