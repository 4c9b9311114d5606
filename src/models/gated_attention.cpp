#include "models/gated_attention.h"

#include <cmath>

namespace duet {

GatedAttentionScratch::GatedAttentionScratch(Backend& b, const GatedAttentionShape& s, int64_t n)
    : query_and_gate(b.alloc(static_cast<size_t>(n * 2 * s.heads * s.head_dim))),
      new_keys(b.alloc(static_cast<size_t>(n * s.kv_heads * s.head_dim))),
      new_values(b.alloc(static_cast<size_t>(n * s.kv_heads * s.head_dim))),
      queries(b.alloc(static_cast<size_t>(n * s.heads * s.head_dim))),
      attended(b.alloc(static_cast<size_t>(n * s.heads * s.head_dim))) {}

void gated_attention(Backend& b, const GatedAttentionShape& s, const GatedAttentionWeights& w, const NormedInput& xn,
                     const StepPosition& at, float* keys, float* values, GatedAttentionScratch& sc, float* out) {
    const int64_t n = xn.tokens(), hd = s.head_dim, kv_width = s.kv_heads * hd, q_row = 2 * s.heads * hd;
    float* query_and_gate = sc.query_and_gate.data();
    xn.products({{w.q, query_and_gate}, {w.k, sc.new_keys.data()}, {w.v, sc.new_values.data()}});
    b.mark(s.marks.qkv, Backend::MarkLevel::Op);

    AttentionRowsArgs rows;
    HeadNormRopeArgs& r = rows.queries;
    r.n = n;
    r.head_dim = hd;
    r.eps = s.eps;
    r.pos = at.pos;
    r.position = at.at;
    r.rotary_dim = s.rotary_dim;
    r.theta = s.theta;
    r.style = s.rope;
    rows.keys = r;
    r.heads = s.heads;
    r.x = query_and_gate;
    r.x_row_stride = q_row;
    r.x_head_stride = 2 * hd;
    r.norm_weight = w.q_norm.data();
    r.out = sc.queries.data();
    r.out_row_stride = s.heads * hd;
    HeadNormRopeArgs& k = rows.keys;
    k.heads = s.kv_heads;
    k.x = sc.new_keys.data();
    k.x_row_stride = kv_width;
    k.x_head_stride = hd;
    k.norm_weight = w.k_norm.data();
    k.out = sc.new_keys.data();
    k.out_row_stride = kv_width;
    rows.values = sc.new_values.data();
    rows.key_cache = keys;
    rows.value_cache = values;
    rows.kv_width = kv_width;
    b.prepare_attention_rows(rows);
    b.mark(s.marks.rows, Backend::MarkLevel::Op);

    AttentionArgs a;
    a.n = n;
    a.pos = at.pos;
    a.position = at.at;
    a.capacity = at.capacity;
    a.heads = s.heads;
    a.kv_heads = s.kv_heads;
    a.head_dim = hd;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    a.q = sc.queries.data();
    a.k_cache = keys;
    a.v_cache = values;
    a.out = sc.attended.data();
    a.output_gate = query_and_gate + hd;
    a.gate_row_stride = q_row;
    a.gate_head_stride = 2 * hd;
    b.attention(a);
    b.mark(s.marks.core, Backend::MarkLevel::Op);
    b.matmul_fused(w.o, sc.attended.data(), n, out, FusedProduct{nullptr, 0.0f, true});
}

}  // namespace duet
