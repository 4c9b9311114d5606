#include "models/transcribe/speech_encoder.h"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/bidirectional_attention.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/work_split.h"

namespace duet::transcribe {

LayerNormWeights bind_layer_norm(WeightBinder& binder, const std::string& name, int64_t width) {
    return {binder.vector({name + ".weight"}, {width}), binder.vector({name + ".bias"}, {width})};
}

LinearWeights bind_linear(WeightBinder& binder, const std::string& name, int64_t out, int64_t in, bool bias) {
    LinearWeights w;
    w.weight = binder.matrix({name + ".weight"}, out, in);
    if (bias) w.bias = binder.vector({name + ".bias"}, {out});
    return w;
}

void linear(const LinearWeights& w, const float* x, int64_t n, float* out, ThreadPool* pool, PerceptionDevice* device) {
    if (device != nullptr) {
        device->linear(w, x, n, out);
        return;
    }
    cpu::matmul(w.weight, x, n, out, pool);
    if (w.bias.empty()) return;
    const int64_t rows = w.weight.rows;
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t r = 0; r < rows; ++r) out[t * rows + r] += w.bias[r];
    }
}

EncoderWeights bind_encoder(const EncoderConfig& c, WeightBinder& binder, const std::string& prefix) {
    EncoderWeights w;
    w.pre_encode = binder.matrix({prefix + "pre_encode.proj.weight"}, c.width, c.stacking * c.feat_in);
    w.embed_norm = bind_layer_norm(binder, prefix + "embed_norm", c.width);
    w.final_norm = bind_layer_norm(binder, prefix + "final_norm", c.width);
    for (int64_t i = 0; i < c.layers; ++i) {
        const std::string p = prefix + "layers." + std::to_string(i) + ".";
        EncoderLayerWeights l;
        l.norm1 = bind_layer_norm(binder, p + "norm1", c.width);
        l.norm2 = bind_layer_norm(binder, p + "norm2", c.width);
        l.qkv = binder.matrix({p + "attn.w_qkv.weight"}, 3 * c.width, c.width);
        if (c.qk_norm) {
            l.q_norm = bind_layer_norm(binder, p + "attn.q_norm", c.head_dim());
            l.k_norm = bind_layer_norm(binder, p + "attn.k_norm", c.head_dim());
        }
        l.out_proj = bind_linear(binder, p + "attn.out_proj", c.width, c.width, true);
        l.ffn_up = bind_linear(binder, p + "ffn.net.0", c.ffn, c.width, true);
        l.ffn_down = bind_linear(binder, p + "ffn.net.3", c.width, c.ffn, true);
        w.layers.push_back(std::move(l));
    }
    return w;
}

RopeTables::RopeTables(const EncoderConfig& c, int64_t n) : half(c.rotary_dim() / 2) {
    cos.resize(static_cast<size_t>(n * half));
    sin.resize(static_cast<size_t>(n * half));
    for (int64_t t = 0; t < n; ++t) {
        cpu::rope_angles(t, c.rotary_dim(), c.rope_base, cos.data() + t * half, sin.data() + t * half);
    }
}

namespace {

// q/k LayerNorm (when on) and RoPE on every head of q and k, in place in the [q | k | v] rows.
void prepare_queries_and_keys(const EncoderConfig& c, const EncoderLayerWeights& l, const RopeTables& rope,
                              float* qkv, int64_t n, ThreadPool* pool) {
    const int64_t hd = c.head_dim(), width = c.width;
    parallel_for(pool, n, cpu::grain_for(2 * width * 12), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
            const float* cos = rope.cos.data() + t * rope.half;
            const float* sin = rope.sin.data() + t * rope.half;
            for (int64_t part = 0; part < 2; ++part) {
                const LayerNormWeights& norm = part == 0 ? l.q_norm : l.k_norm;
                for (int64_t h = 0; h < c.heads; ++h) {
                    float* head = qkv + t * 3 * width + part * width + h * hd;
                    if (c.qk_norm) {
                        cpu::layer_norm_row(head, hd, norm.weight.data(), norm.bias.data(), c.norm_eps, head);
                    }
                    cpu::rope_rotate_half(head, c.rotary_dim(), cos, sin);
                }
            }
        }
    });
}

void add_into(float* acc, const float* x, int64_t count) {
    for (int64_t i = 0; i < count; ++i) acc[i] += x[i];
}

void gelu_in_place(std::vector<float>& x, ThreadPool* pool) {
    parallel_for(pool, static_cast<int64_t>(x.size()), 1 << 14, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) x[i] = cpu::gelu(x[i]);
    });
}

}  // namespace

std::vector<float> stack_and_project(const EncoderConfig& c, const EncoderWeights& w, const float* mel,
                                     int64_t mel_frames, int64_t valid_mel, ThreadPool* pool,
                                     PerceptionDevice* device) {
    const int64_t n = (mel_frames + c.stacking - 1) / c.stacking;
    // Encoder frame j is mel frames 8j … 8j+7 side by side; frames past the valid ones are zeros.
    std::vector<float> stacked(static_cast<size_t>(n * c.stacking * c.feat_in), 0.0f);
    std::copy(mel, mel + std::min(valid_mel, mel_frames) * c.feat_in, stacked.begin());
    std::vector<float> x(static_cast<size_t>(n * c.width));
    linear(LinearWeights{w.pre_encode, {}}, stacked.data(), n, x.data(), pool, device);
    return x;
}

void encode_projected(const EncoderConfig& c, const EncoderWeights& w, std::vector<float>& x, int64_t n, int64_t keys,
                      ThreadPool* pool, PerceptionDevice* device) {
    if (device != nullptr) {
        device->run(c, w, x, n, keys);
        return;
    }
    const int64_t width = c.width;
    cpu::layer_norm(x.data(), n, width, w.embed_norm.weight.data(), w.embed_norm.bias.data(), c.norm_eps, x.data(),
                    pool);
    const RopeTables rope(c, n);
    std::vector<float> normed(x.size()), qkv(static_cast<size_t>(n * 3 * width)), attended(x.size()),
        branch(x.size()), hidden(static_cast<size_t>(n * c.ffn));
    for (const EncoderLayerWeights& l : w.layers) {
        cpu::layer_norm(x.data(), n, width, l.norm1.weight.data(), l.norm1.bias.data(), c.norm_eps, normed.data(),
                        pool);
        cpu::matmul(l.qkv, normed.data(), n, qkv.data(), pool);
        prepare_queries_and_keys(c, l, rope, qkv.data(), n, pool);
        cpu::BidirectionalAttentionArgs a;
        a.n = n;
        a.keys = keys;
        a.heads = c.heads;
        a.head_dim = c.head_dim();
        a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim()));
        a.q = qkv.data();
        a.k = qkv.data() + width;
        a.v = qkv.data() + 2 * width;
        a.stride = 3 * width;
        a.out = attended.data();
        cpu::bidirectional_attention(a, pool);
        linear(l.out_proj, attended.data(), n, branch.data(), pool);
        add_into(x.data(), branch.data(), n * width);

        cpu::layer_norm(x.data(), n, width, l.norm2.weight.data(), l.norm2.bias.data(), c.norm_eps, normed.data(),
                        pool);
        linear(l.ffn_up, normed.data(), n, hidden.data(), pool);
        gelu_in_place(hidden, pool);
        linear(l.ffn_down, hidden.data(), n, branch.data(), pool);
        add_into(x.data(), branch.data(), n * width);
    }
    cpu::layer_norm(x.data(), n, width, w.final_norm.weight.data(), w.final_norm.bias.data(), c.norm_eps, x.data(),
                    pool);
}

std::vector<float> encode(const EncoderConfig& c, const EncoderWeights& w, const float* mel, int64_t mel_frames,
                          int64_t valid_mel, ThreadPool* pool, PerceptionDevice* device) {
    std::vector<float> x = stack_and_project(c, w, mel, mel_frames, valid_mel, pool, device);
    const int64_t n = (mel_frames + c.stacking - 1) / c.stacking;
    encode_projected(c, w, x, n, (valid_mel + c.stacking - 1) / c.stacking, pool, device);
    return x;
}

}  // namespace duet::transcribe
