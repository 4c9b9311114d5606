// duet info: what a checkpoint holds.
#include <cstdio>

#include "cli/commands.h"
#include "kernels/cpu/simd_level.h"
#include "models/nemotron_h/model.h"

namespace duet::cli {

int run_info(const Argv& argv) {
    Args args(argv, {"--model"}, {});
    const nemotron_h::Model model = nemotron_h::Model::load(args.text("--model"));
    const nemotron_h::Config& c = model.config();
    std::printf("architecture   nemotron_h (%s layout)\n", model.layout().c_str());
    std::printf("layers         %zu  %s  (%ld Mamba-2, %ld attention, %ld MoE, %ld MLP)\n", c.layers.size(),
                c.pattern().c_str(), static_cast<long>(c.count(nemotron_h::LayerKind::Mamba)),
                static_cast<long>(c.count(nemotron_h::LayerKind::Attention)),
                static_cast<long>(c.count(nemotron_h::LayerKind::MoE)),
                static_cast<long>(c.count(nemotron_h::LayerKind::MLP)));
    std::printf("hidden         %ld\nvocab          %ld\n", static_cast<long>(c.hidden), static_cast<long>(c.vocab));
    if (c.mamba_heads > 0) {
        std::printf("mamba-2        %ld heads x %ld, %ld groups, state %ld, conv %ld\n",
                    static_cast<long>(c.mamba_heads), static_cast<long>(c.mamba_head_dim),
                    static_cast<long>(c.mamba_groups), static_cast<long>(c.ssm_state),
                    static_cast<long>(c.conv_kernel));
    }
    if (c.attn_heads > 0) {
        std::printf("attention      %ld q / %ld kv heads of %ld, no positional encoding\n",
                    static_cast<long>(c.attn_heads), static_cast<long>(c.kv_heads), static_cast<long>(c.head_dim));
    }
    if (c.experts > 0) {
        std::printf("moe            %ld experts, top-%ld, width %ld, shared %ld, scale %g\n",
                    static_cast<long>(c.experts), static_cast<long>(c.experts_per_token),
                    static_cast<long>(c.expert_inter), static_cast<long>(c.shared_inter), c.routed_scale);
    }
    std::printf("tensors        %zu\nbytes          %zu (%.3f GB)\n", model.tensor_count(), model.tensor_bytes(),
                model.tensor_bytes() / 1e9);
    std::printf("decode reads   %zu bytes of weights per token\n", model.decode_weight_bytes());
    std::printf("cpu kernels    %s\n", std::string(cpu::simd_level_name(cpu::active_simd_level())).c_str());
    return 0;
}

}  // namespace duet::cli
