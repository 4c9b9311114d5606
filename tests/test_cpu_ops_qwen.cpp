// The CPU kernels behind Qwen3.5-MoE's operations (the gated delta rule in both forms, the per-head
// norm with partial RoPE, the per-head norm-then-gate, the sigmoid output gate, softmax routing and
// the SwiGLU mixture of experts), each checked against a reference written here from the formula
// alone, in double precision, on random inputs. Every kernel also runs without a pool and on a
// two-thread pool, and the two results must be bit-identical. Inputs read through a row stride get
// NaN in the gaps, so reading past a row's end fails the comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "kernels/cpu/gated_attention.h"
#include "kernels/cpu/gated_delta_rule.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/moe_swiglu.h"
#include "tensor/matrix.h"
#include "kernel_test_support.h"

namespace duet::cpu {
namespace {

constexpr double kTolerance = 1e-5;

using duet::testing::random_strided_rows;
using duet::testing::random_values;
using duet::testing::relative_error;
using duet::testing::bit_identical;
using duet::testing::relu2_ref;
using duet::testing::sigmoid_ref;
using duet::testing::silu_ref;
using duet::testing::softplus_ref;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }


// ---------------------------------------------------------------------------------------------
// Gated delta rule

struct DeltaShape {
    int64_t k_heads, v_heads, k_dim, v_dim;
};

// Inputs of one gated-delta-rule call, owned.
struct DeltaInputs {
    DeltaShape s;
    int64_t n = 0, stride = 0;
    std::vector<float> qkv, a, b, neg_exp_a_log, dt_bias, state;

    DeltaInputs(std::mt19937& rng, DeltaShape shape, int64_t tokens) : s(shape), n(tokens) {
        const int64_t width = 2 * s.k_heads * s.k_dim + s.v_heads * s.v_dim;
        stride = width + 3;
        qkv = random_strided_rows(rng, n, width, stride, -2.0f, 2.0f);
        a = random_values(rng, n * s.v_heads, -4.0f, 3.0f);
        b = random_values(rng, n * s.v_heads, -3.0f, 3.0f);
        for (float u : random_values(rng, s.v_heads, -1.0f, 1.5f)) neg_exp_a_log.push_back(-std::exp(u));
        dt_bias = random_values(rng, s.v_heads, -2.0f, 1.0f);
        state = random_values(rng, s.v_heads * s.k_dim * s.v_dim, -0.5f, 0.5f);
    }

    // Tokens [first, first + count) as a call on `state`, the chunked form when chunk > 0.
    GatedDeltaArgs args(int64_t first, int64_t count, float* st, float* out, int64_t chunk) const {
        GatedDeltaArgs g;
        g.n = count;
        g.k_heads = s.k_heads;
        g.v_heads = s.v_heads;
        g.k_dim = s.k_dim;
        g.v_dim = s.v_dim;
        g.qkv = qkv.data() + first * stride;
        g.qkv_stride = stride;
        g.a = a.data() + first * s.v_heads;
        g.a_stride = s.v_heads;
        g.b = b.data() + first * s.v_heads;
        g.b_stride = s.v_heads;
        g.neg_exp_a_log = neg_exp_a_log.data();
        g.dt_bias = dt_bias.data();
        g.state = st;
        g.out = out;
        g.chunk = chunk;
        return g;
    }
};

// The recurrence exactly as written, in double: outputs [n, v_heads·v_dim]; `state` updated.
std::vector<double> delta_rule_reference(const DeltaInputs& in, std::vector<double>& state) {
    const DeltaShape& s = in.s;
    const int64_t r = s.v_heads / s.k_heads, qk = s.k_heads * s.k_dim;
    std::vector<double> out(static_cast<size_t>(in.n * s.v_heads * s.v_dim));
    auto normalised = [](const float* x, int64_t dim, double scale) {
        double sum = 0.0;
        for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(x[i]) * x[i];
        std::vector<double> v(static_cast<size_t>(dim));
        for (int64_t i = 0; i < dim; ++i) v[i] = x[i] / std::sqrt(sum + 1e-6) * scale;
        return v;
    };
    for (int64_t t = 0; t < in.n; ++t) {
        const float* row = in.qkv.data() + t * in.stride;
        for (int64_t h = 0; h < s.v_heads; ++h) {
            const int64_t kh = h / r;
            const std::vector<double> q = normalised(row + kh * s.k_dim, s.k_dim, 1.0 / std::sqrt(double(s.k_dim)));
            const std::vector<double> k = normalised(row + qk + kh * s.k_dim, s.k_dim, 1.0);
            const float* v = row + 2 * qk + h * s.v_dim;
            const double g = in.neg_exp_a_log[h] * softplus_ref(double(in.a[t * s.v_heads + h]) + in.dt_bias[h]);
            const double beta = sigmoid_ref(in.b[t * s.v_heads + h]);
            double* S = state.data() + h * s.k_dim * s.v_dim;
            for (int64_t i = 0; i < s.k_dim * s.v_dim; ++i) S[i] *= std::exp(g);
            for (int64_t j = 0; j < s.v_dim; ++j) {
                double kv = 0.0;
                for (int64_t i = 0; i < s.k_dim; ++i) kv += S[i * s.v_dim + j] * k[i];
                const double delta = beta * (v[j] - kv);
                for (int64_t i = 0; i < s.k_dim; ++i) S[i * s.v_dim + j] += k[i] * delta;
                double o = 0.0;
                for (int64_t i = 0; i < s.k_dim; ++i) o += S[i * s.v_dim + j] * q[i];
                out[(t * s.v_heads + h) * s.v_dim + j] = o;
            }
        }
    }
    return out;
}

void check_delta_rule(DeltaShape shape, int64_t n, int64_t chunk, unsigned seed) {
    SCOPED_TRACE("k_heads=" + std::to_string(shape.k_heads) + " v_heads=" + std::to_string(shape.v_heads) +
                 " k_dim=" + std::to_string(shape.k_dim) + " v_dim=" + std::to_string(shape.v_dim) +
                 " n=" + std::to_string(n) + " chunk=" + std::to_string(chunk));
    std::mt19937 rng(seed);
    const DeltaInputs in(rng, shape, n);
    std::vector<double> state_ref = widen(in.state);
    const std::vector<double> out_ref = delta_rule_reference(in, state_ref);

    ThreadPool pool(2);
    const size_t out_size = static_cast<size_t>(n * shape.v_heads * shape.v_dim);
    std::vector<float> serial_state = in.state, pooled_state = in.state;
    std::vector<float> serial(out_size), pooled(out_size);
    gated_delta_rule(in.args(0, n, serial_state.data(), serial.data(), chunk), nullptr);
    gated_delta_rule(in.args(0, n, pooled_state.data(), pooled.data(), chunk), &pool);
    EXPECT_LE(relative_error(serial, out_ref), 2e-5);
    EXPECT_LE(relative_error(serial_state, state_ref), 2e-5);
    EXPECT_TRUE(bit_identical(serial, pooled));
    EXPECT_TRUE(bit_identical(serial_state, pooled_state));
}

const DeltaShape kDeltaShapes[] = {{2, 4, 16, 16}, {1, 1, 8, 12}, {2, 6, 32, 24}};

TEST(CpuOpsGatedDelta, RecurrenceMatchesReference) {
    unsigned seed = 300;
    for (DeltaShape s : kDeltaShapes) {
        for (int64_t n : {1, 2, 17, 70}) check_delta_rule(s, n, 0, seed++);
    }
}

TEST(CpuOpsGatedDelta, ChunkedFormMatchesReference) {
    unsigned seed = 400;
    for (DeltaShape s : kDeltaShapes) {
        for (int64_t n : {1, 63, 64, 65, 200}) check_delta_rule(s, n, 64, seed++);
        for (int64_t n : {5, 16, 23}) check_delta_rule(s, n, 8, seed++);
    }
}

// Prefill split at arbitrary points (chunked 37, chunked 50, then single-token recurrence) gives
// the outputs and state of one recurrence over all of it.
TEST(CpuOpsGatedDelta, PiecesWithCarriedStateEqualOneCall) {
    std::mt19937 rng(500);
    const DeltaShape s{2, 4, 16, 16};
    const int64_t n = 37 + 50 + 3, width = s.v_heads * s.v_dim;
    const DeltaInputs in(rng, s, n);
    std::vector<float> whole_state = in.state, whole(static_cast<size_t>(n * width));
    gated_delta_rule(in.args(0, n, whole_state.data(), whole.data(), 0), nullptr);

    std::vector<float> state = in.state, pieces(whole.size());
    gated_delta_rule(in.args(0, 37, state.data(), pieces.data(), 64), nullptr);
    gated_delta_rule(in.args(37, 50, state.data(), pieces.data() + 37 * width, 64), nullptr);
    for (int64_t t = 87; t < n; ++t) gated_delta_rule(in.args(t, 1, state.data(), pieces.data() + t * width, 0), nullptr);
    EXPECT_LE(relative_error(pieces, widen(whole)), 2e-5);
    EXPECT_LE(relative_error(state, widen(whole_state)), 2e-5);
}

// ---------------------------------------------------------------------------------------------
// Per-head norms, RoPE and gates

std::vector<double> head_norm_rope_reference(const std::vector<float>& x, int64_t row_stride, int64_t head_stride,
                                             const HeadNormRopeArgs& a) {
    std::vector<double> out(static_cast<size_t>(a.n * a.heads * a.head_dim));
    const int64_t half = a.rotary_dim / 2;
    for (int64_t t = 0; t < a.n; ++t) {
        for (int64_t h = 0; h < a.heads; ++h) {
            const float* src = x.data() + t * row_stride + h * head_stride;
            double sum = 0.0;
            for (int64_t i = 0; i < a.head_dim; ++i) sum += double(src[i]) * src[i];
            const double inv = 1.0 / std::sqrt(sum / a.head_dim + a.eps);
            std::vector<double> v(static_cast<size_t>(a.head_dim));
            for (int64_t i = 0; i < a.head_dim; ++i) v[i] = src[i] * inv * a.norm_weight[i];
            double* dst = out.data() + (t * a.heads + h) * a.head_dim;
            std::copy(v.begin(), v.end(), dst);
            for (int64_t i = 0; i < half; ++i) {
                const double angle = double(a.pos + t) / std::pow(double(a.theta), 2.0 * i / a.rotary_dim);
                // The pair rotated together: (i, i + d/2) for rotate-half, (2i, 2i + 1) interleaved.
                const int64_t first = a.style == RopeStyle::RotateHalf ? i : 2 * i;
                const int64_t second = a.style == RopeStyle::RotateHalf ? i + half : 2 * i + 1;
                dst[first] = v[first] * std::cos(angle) - v[second] * std::sin(angle);
                dst[second] = v[second] * std::cos(angle) + v[first] * std::sin(angle);
            }
        }
    }
    return out;
}

TEST(CpuOpsGatedAttention, HeadNormRopeMatchesReference) {
    struct Shape {
        int64_t n, heads, head_dim, rotary_dim, pos;
    };
    ThreadPool pool(2);
    std::mt19937 rng(600);
    for (RopeStyle style : {RopeStyle::RotateHalf, RopeStyle::Interleaved})
    for (Shape s : {Shape{1, 1, 8, 0, 0}, Shape{3, 4, 32, 8, 5}, Shape{70, 4, 32, 8, 0}, Shape{5, 2, 16, 16, 100},
                    Shape{200, 16, 64, 16, 37}}) {
        SCOPED_TRACE("n=" + std::to_string(s.n) + " heads=" + std::to_string(s.heads) +
                     " rotary=" + std::to_string(s.rotary_dim) +
                     (style == RopeStyle::Interleaved ? " interleaved" : " rotate-half"));
        // Heads interleaved with a same-sized gate, as in q_proj's output.
        const int64_t head_stride = 2 * s.head_dim, row_stride = s.heads * head_stride + 1;
        const std::vector<float> x = random_strided_rows(rng, s.n, row_stride - 1, row_stride, -3.0f, 3.0f);
        const std::vector<float> weight = random_values(rng, s.head_dim, 0.5f, 1.5f);
        HeadNormRopeArgs a;
        a.n = s.n;
        a.heads = s.heads;
        a.head_dim = s.head_dim;
        a.x = x.data();
        a.x_row_stride = row_stride;
        a.x_head_stride = head_stride;
        a.norm_weight = weight.data();
        a.eps = 1e-6f;
        a.pos = s.pos;
        a.rotary_dim = s.rotary_dim;
        a.theta = 1e7f;
        a.style = style;
        a.out_row_stride = s.heads * s.head_dim;
        std::vector<float> serial(static_cast<size_t>(s.n * s.heads * s.head_dim)), pooled(serial.size());
        a.out = serial.data();
        head_rmsnorm_rope(a, nullptr);
        a.out = pooled.data();
        head_rmsnorm_rope(a, &pool);
        EXPECT_LE(relative_error(serial, head_norm_rope_reference(x, row_stride, head_stride, a)), 1e-5);
        EXPECT_TRUE(bit_identical(serial, pooled));
    }
}

TEST(CpuOpsGatedAttention, HeadNormRopeWorksInPlace) {
    std::mt19937 rng(601);
    const int64_t n = 4, heads = 2, hd = 16;
    std::vector<float> x = random_values(rng, n * heads * hd, -2.0f, 2.0f);
    const std::vector<float> weight = random_values(rng, hd, 0.5f, 1.5f);
    HeadNormRopeArgs a;
    a.n = n;
    a.heads = heads;
    a.head_dim = hd;
    a.x = x.data();
    a.x_row_stride = heads * hd;
    a.x_head_stride = hd;
    a.norm_weight = weight.data();
    a.eps = 1e-6f;
    a.pos = 3;
    a.rotary_dim = 4;
    a.theta = 10000.0f;
    a.out_row_stride = heads * hd;
    std::vector<float> separate(x.size());
    a.out = separate.data();
    head_rmsnorm_rope(a, nullptr);
    a.out = x.data();
    head_rmsnorm_rope(a, nullptr);
    EXPECT_TRUE(bit_identical(x, separate));
}

TEST(CpuOpsGatedAttention, HeadNormThenSiluGateMatchesReference) {
    ThreadPool pool(2);
    std::mt19937 rng(602);
    for (int64_t n : {1, 9, 300}) {
        const int64_t heads = 4, hd = 16, z_stride = heads * hd + 5;
        const std::vector<float> y = random_values(rng, n * heads * hd, -3.0f, 3.0f);
        const std::vector<float> z = random_strided_rows(rng, n, heads * hd, z_stride, -4.0f, 4.0f);
        const std::vector<float> weight = random_values(rng, hd, 0.5f, 1.5f);
        std::vector<double> expected(y.size());
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t h = 0; h < heads; ++h) {
                const float* row = y.data() + (t * heads + h) * hd;
                double sum = 0.0;
                for (int64_t i = 0; i < hd; ++i) sum += double(row[i]) * row[i];
                const double inv = 1.0 / std::sqrt(sum / hd + 1e-6);
                for (int64_t i = 0; i < hd; ++i) {
                    expected[(t * heads + h) * hd + i] = row[i] * inv * weight[i] * silu_ref(z[t * z_stride + h * hd + i]);
                }
            }
        }
        std::vector<float> serial = y, pooled = y;
        head_rmsnorm_silu_gate(serial.data(), z.data(), z_stride, weight.data(), n, heads, hd, 1e-6f, nullptr);
        head_rmsnorm_silu_gate(pooled.data(), z.data(), z_stride, weight.data(), n, heads, hd, 1e-6f, &pool);
        EXPECT_LE(relative_error(serial, expected), kTolerance) << "n=" << n;
        EXPECT_TRUE(bit_identical(serial, pooled));
    }
}

TEST(CpuOpsGatedAttention, SigmoidGateHeadsMatchesReference) {
    ThreadPool pool(2);
    std::mt19937 rng(603);
    for (int64_t n : {1, 7, 500}) {
        const int64_t heads = 4, hd = 32, row_stride = 2 * heads * hd;
        const std::vector<float> y = random_values(rng, n * heads * hd, -3.0f, 3.0f);
        const std::vector<float> gate = random_values(rng, n * row_stride, -5.0f, 5.0f);
        std::vector<double> expected(y.size());
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t h = 0; h < heads; ++h) {
                for (int64_t i = 0; i < hd; ++i) {
                    const size_t at = static_cast<size_t>((t * heads + h) * hd + i);
                    expected[at] = y[at] * sigmoid_ref(gate[t * row_stride + h * 2 * hd + hd + i]);
                }
            }
        }
        std::vector<float> serial = y, pooled = y;
        sigmoid_gate_heads(serial.data(), gate.data() + hd, row_stride, 2 * hd, n, heads, hd, nullptr);
        sigmoid_gate_heads(pooled.data(), gate.data() + hd, row_stride, 2 * hd, n, heads, hd, &pool);
        EXPECT_LE(relative_error(serial, expected), kTolerance) << "n=" << n;
        EXPECT_TRUE(bit_identical(serial, pooled));
    }
}

// ---------------------------------------------------------------------------------------------
// Softmax routing and the SwiGLU mixture of experts

TEST(CpuOpsSoftmaxRouting, MatchesReference) {
    std::mt19937 rng(700);
    for (int64_t experts : {2, 8, 61, 256}) {
        for (int64_t k : {int64_t{1}, std::min<int64_t>(2, experts), std::min<int64_t>(8, experts)}) {
            for (bool normalize : {true, false}) {
                const std::vector<float> logits = random_values(rng, experts, -4.0f, 4.0f);
                std::vector<double> p(logits.begin(), logits.end());
                const double max_logit = *std::max_element(p.begin(), p.end());
                double sum = 0.0;
                for (double& v : p) sum += v = std::exp(v - max_logit);
                for (double& v : p) v /= sum;
                std::vector<int32_t> order(static_cast<size_t>(experts));
                std::iota(order.begin(), order.end(), 0);
                std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
                double chosen = 0.0;
                for (int64_t i = 0; i < k; ++i) chosen += p[order[i]];
                std::vector<ExpertChoice> out(static_cast<size_t>(k));
                route_softmax_topk(logits.data(), experts, k, normalize, out.data());
                for (int64_t i = 0; i < k; ++i) {
                    EXPECT_EQ(out[i].expert, order[i]);
                    const double expected = normalize ? p[order[i]] / chosen : p[order[i]];
                    EXPECT_NEAR(out[i].weight, expected, 1e-6 * std::max(1.0, expected));
                }
            }
        }
    }
}

TEST(CpuOpsSoftmaxRouting, TiesGoToTheLowerIndex) {
    const std::vector<float> logits = {0.5f, 1.0f, 1.0f, 1.0f};
    std::vector<ExpertChoice> out(2);
    route_softmax_topk(logits.data(), 4, 2, true, out.data());
    EXPECT_EQ(out[0].expert, 1);
    EXPECT_EQ(out[1].expert, 2);
    EXPECT_FLOAT_EQ(out[0].weight, 0.5f);
}

MatrixView f32_view(const std::vector<float>& data, int64_t rows, int64_t cols) {
    return {DType::F32, rows, cols, data.data()};
}

// Every expert applied densely in double, weighed by the routing the formula gives.
TEST(CpuOpsMoeSwiglu, MatchesDenseReference) {
    struct Shape {
        int64_t n, hidden, experts, top_k, inter, shared_inter;
    };
    ThreadPool pool(2);
    std::mt19937 rng(800);
    for (Shape s : {Shape{1, 16, 4, 1, 8, 12}, Shape{9, 64, 8, 2, 32, 48}, Shape{70, 96, 16, 4, 40, 24}}) {
        SCOPED_TRACE("n=" + std::to_string(s.n) + " experts=" + std::to_string(s.experts));
        auto matrix = [&](int64_t rows, int64_t cols) {
            return random_values(rng, rows * cols, -std::sqrt(3.0f / cols), std::sqrt(3.0f / cols));
        };
        const std::vector<float> x = random_values(rng, s.n * s.hidden, -2.0f, 2.0f);
        std::vector<float> router = matrix(s.experts, s.hidden);
        for (float& v : router) v *= 4.0f;  // spread the scores so the choice is not a coin toss
        std::vector<std::vector<float>> gate, up, down;
        for (int64_t e = 0; e < s.experts; ++e) {
            gate.push_back(matrix(s.inter, s.hidden));
            up.push_back(matrix(s.inter, s.hidden));
            down.push_back(matrix(s.hidden, s.inter));
        }
        const std::vector<float> sg = matrix(s.shared_inter, s.hidden), su = matrix(s.shared_inter, s.hidden),
                                 sd = matrix(s.hidden, s.shared_inter), seg = matrix(1, s.hidden);
        SwigluMoeWeights w;
        w.router = f32_view(router, s.experts, s.hidden);
        for (int64_t e = 0; e < s.experts; ++e) {
            w.gate.push_back(f32_view(gate[e], s.inter, s.hidden));
            w.up.push_back(f32_view(up[e], s.inter, s.hidden));
            w.down.push_back(f32_view(down[e], s.hidden, s.inter));
        }
        w.shared_gate = f32_view(sg, s.shared_inter, s.hidden);
        w.shared_up = f32_view(su, s.shared_inter, s.hidden);
        w.shared_down = f32_view(sd, s.hidden, s.shared_inter);
        w.shared_expert_gate = f32_view(seg, 1, s.hidden);

        auto swiglu = [&](const double* xt, const std::vector<float>& g, const std::vector<float>& u,
                          const std::vector<float>& d, int64_t inter) {
            std::vector<double> mid(static_cast<size_t>(inter)), out(static_cast<size_t>(s.hidden), 0.0);
            for (int64_t r = 0; r < inter; ++r) {
                double gv = 0.0, uv = 0.0;
                for (int64_t c = 0; c < s.hidden; ++c) {
                    gv += double(g[r * s.hidden + c]) * xt[c];
                    uv += double(u[r * s.hidden + c]) * xt[c];
                }
                mid[r] = silu_ref(gv) * uv;
            }
            for (int64_t r = 0; r < s.hidden; ++r) {
                for (int64_t c = 0; c < inter; ++c) out[r] += double(d[r * inter + c]) * mid[c];
            }
            return out;
        };
        std::vector<double> expected(static_cast<size_t>(s.n * s.hidden), 0.0);
        for (int64_t t = 0; t < s.n; ++t) {
            const std::vector<double> xt(x.begin() + t * s.hidden, x.begin() + (t + 1) * s.hidden);
            std::vector<float> logits(static_cast<size_t>(s.experts));
            for (int64_t e = 0; e < s.experts; ++e) {
                double v = 0.0;
                for (int64_t c = 0; c < s.hidden; ++c) v += double(router[e * s.hidden + c]) * xt[c];
                logits[e] = static_cast<float>(v);
            }
            std::vector<ExpertChoice> chosen(static_cast<size_t>(s.top_k));
            route_softmax_topk(logits.data(), s.experts, s.top_k, true, chosen.data());
            double* row = expected.data() + t * s.hidden;
            for (const ExpertChoice& ch : chosen) {
                const std::vector<double> y = swiglu(xt.data(), gate[ch.expert], up[ch.expert], down[ch.expert], s.inter);
                for (int64_t i = 0; i < s.hidden; ++i) row[i] += ch.weight * y[i];
            }
            double gate_logit = 0.0;
            for (int64_t c = 0; c < s.hidden; ++c) gate_logit += double(seg[c]) * xt[c];
            const std::vector<double> y = swiglu(xt.data(), sg, su, sd, s.shared_inter);
            for (int64_t i = 0; i < s.hidden; ++i) row[i] += sigmoid_ref(gate_logit) * y[i];
        }
        std::vector<float> serial(expected.size()), pooled(expected.size());
        moe_swiglu(x.data(), s.n, w, s.top_k, true, serial.data(), nullptr);
        moe_swiglu(x.data(), s.n, w, s.top_k, true, pooled.data(), &pool);
        EXPECT_LE(relative_error(serial, expected), kTolerance);
        EXPECT_TRUE(bit_identical(serial, pooled));
    }
}

// ---------------------------------------------------------------------------------------------
// Element-wise backend ops

TEST(CpuOpsElementwise, ScaleAndSiluMulMatchReference) {
    std::mt19937 rng(900);
    const std::unique_ptr<Backend> backend = make_cpu_backend(nullptr);
    const int64_t count = 1000;
    std::vector<float> x = random_values(rng, count, -4.0f, 4.0f), up = random_values(rng, count, -2.0f, 2.0f);
    std::vector<double> scaled(x.size()), product(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        scaled[i] = double(x[i]) * 0.375;
        product[i] = double(x[i]) / (1.0 + std::exp(-double(x[i]))) * up[i];
    }
    std::vector<float> y = x;
    backend->scale(y.data(), 0.375f, count);
    EXPECT_LE(relative_error(y, scaled), 1e-7);
    y = x;
    backend->silu_mul(y.data(), up.data(), count);
    EXPECT_LE(relative_error(y, product), 1e-6);
}

TEST(CpuOpsElementwise, SumEmbeddingsSkipsNegativeIdsAndScalesRows) {
    std::mt19937 rng(901);
    const std::unique_ptr<Backend> backend = make_cpu_backend(nullptr);
    const int64_t rows = 12, width = 7, n = 3, per_row = 2;
    const std::vector<float> table = random_values(rng, rows * width);
    const MatrixView view{DType::F32, rows, width, table.data()};
    const std::vector<int32_t> ids = {4, 11, -1, -1, 0, 4};
    const std::vector<float> scale = {0.5f, 2.0f, 1.0f};
    const std::vector<float> start = random_values(rng, n * width);
    for (bool accumulate : {false, true}) {
        std::vector<double> expected(static_cast<size_t>(n * width));
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t i = 0; i < width; ++i) {
                double sum = accumulate ? start[t * width + i] : 0.0;
                for (int64_t j = 0; j < per_row; ++j) {
                    if (ids[t * per_row + j] >= 0) sum += table[ids[t * per_row + j] * width + i];
                }
                expected[t * width + i] = sum * scale[t];
            }
        }
        std::vector<float> out = start;
        backend->sum_embeddings(view, ids.data(), per_row, n, accumulate, scale.data(), out.data());
        EXPECT_LE(relative_error(out, expected), 1e-7) << (accumulate ? "accumulating" : "fresh");
    }
    const std::vector<int32_t> bad = {12};
    std::vector<float> out(width);
    EXPECT_THROW(backend->sum_embeddings(view, bad.data(), 1, 1, false, nullptr, out.data()), Error);
}

}  // namespace
}  // namespace duet::cpu
