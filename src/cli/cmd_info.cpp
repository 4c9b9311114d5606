// duet info: what a checkpoint holds.
#include <cstdio>

#include "cli/commands.h"
#include "kernels/cpu/simd_level.h"
#include "models/drama3/model.h"
#include "models/registry.h"

namespace duet::cli {

namespace {

void print_line(const std::string& name, const std::string& value) {
    std::printf("%-15s %s\n", name.c_str(), value.c_str());
}

void print_sizes(size_t tensors, size_t bytes) {
    print_line("tensors", std::to_string(tensors));
    std::printf("%-15s %zu (%.3f GB)\n", "bytes", bytes, bytes / 1e9);
}

}  // namespace

int run_info(const Argv& argv) {
    Args args(argv, {"--model"}, {});
    const std::string dir = args.text("--model");
    if (model_architecture(dir) == "drama3") {
        const drama3::Model model = drama3::Model::load(dir);
        for (const auto& [name, value] : model.describe()) print_line(name, value);
        print_sizes(model.tensor_count(), model.tensor_bytes());
        std::printf("%-15s %zu bytes of weights per frame\n", "decode reads", model.frame_weight_bytes());
    } else {
        const std::unique_ptr<CausalLM> model = load_causal_lm(dir);
        for (const auto& [name, value] : model->describe()) print_line(name, value);
        print_sizes(model->tensor_count(), model->tensor_bytes());
        std::printf("%-15s %zu bytes of weights per token\n", "decode reads", model->decode_weight_bytes());
    }
    print_line("cpu kernels", std::string(cpu::simd_level_name(cpu::active_simd_level())));
    return 0;
}

}  // namespace duet::cli
