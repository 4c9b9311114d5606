// duet info: what a checkpoint holds.
#include <cstdio>

#include "cli/commands.h"
#include "kernels/cpu/simd_level.h"
#include "models/registry.h"

namespace duet::cli {

int run_info(const Argv& argv) {
    Args args(argv, {"--model"}, {});
    const std::unique_ptr<CausalLM> model = load_causal_lm(args.text("--model"));
    for (const auto& [name, value] : model->describe()) std::printf("%-14s %s\n", name.c_str(), value.c_str());
    std::printf("%-14s %zu\n", "tensors", model->tensor_count());
    std::printf("%-14s %zu (%.3f GB)\n", "bytes", model->tensor_bytes(), model->tensor_bytes() / 1e9);
    std::printf("%-14s %zu bytes of weights per token\n", "decode reads", model->decode_weight_bytes());
    std::printf("%-14s %s\n", "cpu kernels", std::string(cpu::simd_level_name(cpu::active_simd_level())).c_str());
    return 0;
}

}  // namespace duet::cli
