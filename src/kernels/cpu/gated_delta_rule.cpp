#include "kernels/cpu/gated_delta_rule.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/work_split.h"

namespace duet::cpu {

namespace {

// The epsilon inside the L2 norm of q and k (the reference's l2norm default).
constexpr float kL2Epsilon = 1e-6f;

// x · rsqrt(Σx² + eps), scaled by `scale`.
void l2_normalise(const float* x, int64_t dim, float scale, float* out) {
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(sum) + kL2Epsilon);
    for (int64_t i = 0; i < dim; ++i) out[i] = x[i] * inv * scale;
}

// Inputs shared by both forms: q and k normalised per k-head, the decay g and β per v-head.
struct Prepared {
    std::vector<float> q, k;  // [n, k_heads, k_dim]
    std::vector<float> g, beta;  // [n, v_heads]
};

Prepared prepare(const GatedDeltaArgs& a, ThreadPool* pool) {
    Prepared p;
    const int64_t qk_width = a.k_heads * a.k_dim;
    p.q.resize(static_cast<size_t>(a.n * qk_width));
    p.k.resize(p.q.size());
    p.g.resize(static_cast<size_t>(a.n * a.v_heads));
    p.beta.resize(p.g.size());
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(a.k_dim));
    parallel_for(pool, a.n, grain_for(qk_width * 8), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
            const float* row = a.qkv + t * a.qkv_stride;
            for (int64_t j = 0; j < a.k_heads; ++j) {
                const int64_t at = t * qk_width + j * a.k_dim;
                l2_normalise(row + j * a.k_dim, a.k_dim, q_scale, p.q.data() + at);
                l2_normalise(row + qk_width + j * a.k_dim, a.k_dim, 1.0f, p.k.data() + at);
            }
            for (int64_t h = 0; h < a.v_heads; ++h) {
                p.g[t * a.v_heads + h] = a.neg_exp_a_log[h] * softplus(a.a[t * a.a_stride + h] + a.dt_bias[h]);
                p.beta[t * a.v_heads + h] = sigmoid(a.b[t * a.b_stride + h]);
            }
        }
    });
    return p;
}

// What one v-head reads: its token rows in the prepared arrays and in qkv.
struct HeadView {
    const GatedDeltaArgs& a;
    const Prepared& p;
    int64_t h, kh;
    const float* q(int64_t t) const { return p.q.data() + (t * a.k_heads + kh) * a.k_dim; }
    const float* k(int64_t t) const { return p.k.data() + (t * a.k_heads + kh) * a.k_dim; }
    const float* v(int64_t t) const { return a.qkv + t * a.qkv_stride + 2 * a.k_heads * a.k_dim + h * a.v_dim; }
    float g(int64_t t) const { return p.g[t * a.v_heads + h]; }
    float beta(int64_t t) const { return p.beta[t * a.v_heads + h]; }
    float* out(int64_t t) const { return a.out + t * a.v_heads * a.v_dim + h * a.v_dim; }
};

// Token by token: S ← exp(g)·S; δ = β(v − Sᵀk); S ← S + k ⊗ δ; o = Sᵀq.
void recurrent_head(const HeadView& hv, float* state) {
    const int64_t dk = hv.a.k_dim, dv = hv.a.v_dim;
    std::vector<float> delta(static_cast<size_t>(dv));
    for (int64_t t = 0; t < hv.a.n; ++t) {
        const float* q = hv.q(t);
        const float* k = hv.k(t);
        const float* v = hv.v(t);
        const float decay = std::exp(hv.g(t));
        const float beta = hv.beta(t);
        for (int64_t i = 0; i < dk * dv; ++i) state[i] *= decay;
        std::fill(delta.begin(), delta.end(), 0.0f);
        for (int64_t i = 0; i < dk; ++i) axpy_f32(k[i], state + i * dv, delta.data(), dv);  // Sᵀk
        for (int64_t j = 0; j < dv; ++j) delta[j] = (v[j] - delta[j]) * beta;
        float* o = hv.out(t);
        std::fill(o, o + dv, 0.0f);
        for (int64_t i = 0; i < dk; ++i) {
            float* row = state + i * dv;
            axpy_f32(k[i], delta.data(), row, dv);
            axpy_f32(q[i], row, o, dv);
        }
    }
}

// One chunk of L tokens starting at t0, in the WY/UT form. With G the cumulative decay inside the
// chunk and A[i][j] = −β_i (k_i·k_j) exp(G_i − G_j) for j < i, T = (I − A')⁻¹ is found by forward
// substitution; then U = T·(βv) and W = T·(β exp(G) k) give the chunk's corrected values
// v' = U − W·S, its outputs o_i = exp(G_i) q_i·S + Σ_{j≤i} (q_i·k_j) exp(G_i − G_j) v'_j and the new
// state S·exp(G_last) + Σ_j exp(G_last − G_j) k_j ⊗ v'_j.
class ChunkSolver {
public:
    ChunkSolver(int64_t chunk, int64_t dk, int64_t dv)
        : dk_(dk), dv_(dv), cum_(chunk), t_(chunk * chunk), u_(chunk * dv), w_(chunk * dk), kb_(chunk * dk),
          row_(chunk), qs_(dv) {}

    void run(const HeadView& hv, int64_t t0, int64_t len, float* state) {
        const int64_t dk = dk_, dv = dv_;
        float acc = 0.0f;
        for (int64_t i = 0; i < len; ++i) cum_[i] = acc += hv.g(t0 + i);

        // A, strictly lower; then forward substitution row by row.
        for (int64_t i = 0; i < len; ++i) {
            float* ti = t_.data() + i * len;
            const float bi = hv.beta(t0 + i);
            for (int64_t j = 0; j < i; ++j) {
                ti[j] = -bi * dot_f32(hv.k(t0 + i), hv.k(t0 + j), dk) * std::exp(cum_[i] - cum_[j]);
            }
            std::copy(ti, ti + i, row_.begin());
            for (int64_t m = 0; m < i; ++m) axpy_f32(row_[m], t_.data() + m * len, ti, m);
        }

        // U = T·(βv) and W = T·(β exp(G) k), T = A + I.
        for (int64_t i = 0; i < len; ++i) {
            const float bi = hv.beta(t0 + i);
            const float* vi = hv.v(t0 + i);
            const float* ki = hv.k(t0 + i);
            float* ui = u_.data() + i * dv;
            float* kbi = kb_.data() + i * dk;
            for (int64_t c = 0; c < dv; ++c) ui[c] = vi[c] * bi;
            const float scale = bi * std::exp(cum_[i]);
            for (int64_t c = 0; c < dk; ++c) kbi[c] = ki[c] * scale;
        }
        for (int64_t i = len - 1; i >= 0; --i) {
            // Rows below i are still the untransformed βv and β exp(G) k, which row i combines.
            const float* ti = t_.data() + i * len;
            float* ui = u_.data() + i * dv;
            float* wi = w_.data() + i * dk;
            std::copy(kb_.begin() + i * dk, kb_.begin() + (i + 1) * dk, wi);
            for (int64_t j = 0; j < i; ++j) {
                axpy_f32(ti[j], u_.data() + j * dv, ui, dv);
                axpy_f32(ti[j], kb_.data() + j * dk, wi, dk);
            }
        }

        // v' = U − W·S, in place in U.
        for (int64_t i = 0; i < len; ++i) {
            float* ui = u_.data() + i * dv;
            const float* wi = w_.data() + i * dk;
            for (int64_t m = 0; m < dk; ++m) axpy_f32(-wi[m], state + m * dv, ui, dv);
        }

        // Outputs: the state's part, then the chunk's own causal part.
        for (int64_t i = 0; i < len; ++i) {
            const float* qi = hv.q(t0 + i);
            float* o = hv.out(t0 + i);
            std::fill(qs_.begin(), qs_.end(), 0.0f);
            for (int64_t m = 0; m < dk; ++m) axpy_f32(qi[m], state + m * dv, qs_.data(), dv);
            const float state_decay = std::exp(cum_[i]);
            for (int64_t c = 0; c < dv; ++c) o[c] = qs_[c] * state_decay;
            for (int64_t j = 0; j <= i; ++j) {
                const float weight = dot_f32(qi, hv.k(t0 + j), dk) * std::exp(cum_[i] - cum_[j]);
                axpy_f32(weight, u_.data() + j * dv, o, dv);
            }
        }

        // The new state.
        const float last = cum_[len - 1];
        const float total_decay = std::exp(last);
        for (int64_t i = 0; i < dk * dv; ++i) state[i] *= total_decay;
        for (int64_t j = 0; j < len; ++j) {
            const float* kj = hv.k(t0 + j);
            const float* vj = u_.data() + j * dv;
            const float decay = std::exp(last - cum_[j]);
            for (int64_t m = 0; m < dk; ++m) axpy_f32(kj[m] * decay, vj, state + m * dv, dv);
        }
    }

private:
    int64_t dk_, dv_;
    std::vector<float> cum_, t_, u_, w_, kb_, row_, qs_;
};

}  // namespace

void gated_delta_rule(const GatedDeltaArgs& a, ThreadPool* pool) {
    require(a.k_heads > 0 && a.v_heads % a.k_heads == 0, "gated_delta_rule: v_heads (", a.v_heads,
            ") must be a multiple of k_heads (", a.k_heads, ")");
    require(a.chunk >= 0, "gated_delta_rule: chunk is ", a.chunk, ", expected >= 0");
    if (a.n == 0) return;
    const Prepared p = prepare(a, pool);
    const int64_t per_k_head = a.v_heads / a.k_heads;
    const int64_t dk = a.k_dim, dv = a.v_dim;
    parallel_for(pool, a.v_heads, grain_for(a.n * dk * dv * 4), [&](int64_t begin, int64_t end) {
        std::unique_ptr<ChunkSolver> solver;
        if (a.chunk > 0) solver = std::make_unique<ChunkSolver>(std::min(a.chunk, a.n), dk, dv);
        for (int64_t h = begin; h < end; ++h) {
            const HeadView hv{a, p, h, h / per_k_head};
            float* state = a.state + h * dk * dv;
            if (a.chunk == 0) {
                recurrent_head(hv, state);
                continue;
            }
            for (int64_t t0 = 0; t0 < a.n; t0 += a.chunk) solver->run(hv, t0, std::min(a.chunk, a.n - t0), state);
        }
    });
}

}  // namespace duet::cpu
