#include "backend/cuda/mixer_rows_ready.h"

#include "kernels/cuda/ops.h"

namespace duet::cuda {

std::optional<MixerRowsSplit> mamba_rows_split(std::span<const ProductOut> products, const MambaMiddleArgs& m) {
    const SsmScanArgs& s = m.scan;
    if (products.size() != 1 || !mamba_step_fits(m)) return std::nullopt;
    const ProductOut& p = products[0];
    const int64_t inner = s.heads * s.head_dim, channels = m.conv.channels, group_states = s.groups * s.state_size;
    const bool laid_out = channels == inner + 2 * group_states && p.w.rows == inner + channels + s.heads &&
                          m.z == p.out && m.conv.x == p.out + inner && s.dt == m.conv.x + channels;
    if (!laid_out) return std::nullopt;
    const int64_t heads_per_group = s.heads / s.groups, group_width = heads_per_group * s.head_dim;
    MixerRowsSplit split;
    split.units = s.groups;
    split.ranges = {
        {0, inner + channels, s.heads, heads_per_group, 1},             // dt
        {0, 2 * inner, group_states, s.state_size, 1},                  // B
        {0, 2 * inner + group_states, group_states, s.state_size, 1},   // C
        {0, inner, inner, group_width, 1},                              // x
        {0, 0, inner, group_width, 1},                                  // z
    };
    return split;
}

std::optional<MixerRowsSplit> delta_rows_split(std::span<const ProductOut> products, const DeltaMiddleArgs& m) {
    const GatedDeltaArgs& d = m.rule;
    if (products.size() != 4 || !delta_step_fits(m)) return std::nullopt;
    const int64_t keys = d.k_heads * d.k_dim, values = d.v_heads * d.v_dim, channels = 2 * keys + values;
    const bool laid_out = m.conv.channels == channels && m.conv.x == products[0].out &&
                          products[0].w.rows == channels && m.z == products[1].out && products[1].w.rows == values &&
                          d.b == products[2].out && products[2].w.rows == d.v_heads && d.a == products[3].out &&
                          products[3].w.rows == d.v_heads;
    if (!laid_out) return std::nullopt;
    const int64_t ratio = d.v_heads / d.k_heads;
    MixerRowsSplit split;
    split.units = d.v_heads;
    split.ranges = {
        {2, 0, d.v_heads, 1, 1},            // b
        {3, 0, d.v_heads, 1, 1},            // a
        {0, 0, keys, d.k_dim, ratio},       // q: a key head's rows feed its value heads
        {0, keys, keys, d.k_dim, ratio},    // k
        {0, 2 * keys, values, d.v_dim, 1},  // v
        {1, 0, values, d.v_dim, 1},         // z
    };
    return split;
}

}  // namespace duet::cuda
