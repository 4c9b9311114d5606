// The CPU kernels behind the backend's operations (norms, the Mamba-2 convolution and scan, causal
// attention, sigmoid expert routing, the relu² mixture of experts), each checked against a
// reference written here from the formula alone, in double precision, on random inputs of several
// shapes including odd ones. Every kernel also runs once without a pool and once on a two-thread
// pool, and the two results must be bit-identical: the engine's output may not depend on how many
// threads computed it. The kernels hand small problems to one thread, so each test has at least
// one shape large enough for the pool to split the work.
//
// Inputs that are read through a row stride get NaN in the gaps between rows, so a kernel that
// reads past a row's end produces NaN and fails the comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/mamba2.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/norm.h"
#include "tensor/matrix.h"
#include "kernel_test_support.h"

namespace duet::cpu {
namespace {

// max|Δ| / max|reference| allowed for a float kernel against a double reference.
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
constexpr float kInfinity = std::numeric_limits<float>::infinity();


// ---------------------------------------------------------------------------------------------
// Norms

std::vector<double> rmsnorm_reference(const std::vector<float>& x, const std::vector<float>& weight, int64_t n,
                                      int64_t dim, double eps) {
    std::vector<double> out(static_cast<size_t>(n * dim));
    for (int64_t t = 0; t < n; ++t) {
        double sum_sq = 0.0;
        for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(x[t * dim + i]) * x[t * dim + i];
        const double inv_rms = 1.0 / std::sqrt(sum_sq / dim + eps);
        for (int64_t i = 0; i < dim; ++i) out[t * dim + i] = x[t * dim + i] * inv_rms * weight[i];
    }
    return out;
}

TEST(CpuOpsNorm, RmsNormMatchesReference) {
    struct Shape {
        int64_t n, dim;
    };
    ThreadPool pool(2);
    std::mt19937 rng(101);
    for (Shape s : {Shape{1, 1}, Shape{1, 7}, Shape{3, 64}, Shape{17, 129}, Shape{9, 33}, Shape{32, 256},
                    Shape{40, 2048}}) {
        SCOPED_TRACE("n=" + std::to_string(s.n) + " dim=" + std::to_string(s.dim));
        const std::vector<float> x = random_values(rng, s.n * s.dim, -3.0f, 3.0f);
        const std::vector<float> weight = random_values(rng, s.dim, -1.5f, 1.5f);
        const float eps = 1e-5f;
        std::vector<float> serial(static_cast<size_t>(s.n * s.dim)), pooled(serial.size());
        rmsnorm(x.data(), weight.data(), s.n, s.dim, eps, serial.data(), nullptr);
        rmsnorm(x.data(), weight.data(), s.n, s.dim, eps, pooled.data(), &pool);
        EXPECT_LE(relative_error(serial, rmsnorm_reference(x, weight, s.n, s.dim, eps)), kTolerance);
        EXPECT_TRUE(bit_identical(serial, pooled));
    }
}

// y * silu(z), then each contiguous group RMS-normalised on its own and scaled by weight.
std::vector<double> gated_group_rmsnorm_reference(const std::vector<float>& y, const std::vector<float>& z,
                                                  int64_t z_stride, const std::vector<float>& weight, int64_t n,
                                                  int64_t dim, int64_t groups, double eps) {
    const int64_t group_size = dim / groups;
    std::vector<double> out(static_cast<size_t>(n * dim));
    for (int64_t t = 0; t < n; ++t) {
        std::vector<double> gated(static_cast<size_t>(dim));
        for (int64_t i = 0; i < dim; ++i) gated[i] = y[t * dim + i] * silu_ref(z[t * z_stride + i]);
        for (int64_t g = 0; g < groups; ++g) {
            double sum_sq = 0.0;
            for (int64_t i = g * group_size; i < (g + 1) * group_size; ++i) sum_sq += gated[i] * gated[i];
            const double inv_rms = 1.0 / std::sqrt(sum_sq / group_size + eps);
            for (int64_t i = g * group_size; i < (g + 1) * group_size; ++i) {
                out[t * dim + i] = gated[i] * inv_rms * weight[i];
            }
        }
    }
    return out;
}

TEST(CpuOpsNorm, GatedGroupRmsNormMatchesReference) {
    struct Shape {
        int64_t n, dim, groups, z_padding;
    };
    ThreadPool pool(2);
    std::mt19937 rng(102);
    for (Shape s : {Shape{1, 8, 1, 0}, Shape{3, 12, 3, 5}, Shape{17, 64, 8, 3}, Shape{5, 35, 5, 1},
                    Shape{9, 130, 2, 7}, Shape{6, 7, 7, 2}, Shape{9, 1024, 8, 3}}) {
        SCOPED_TRACE("n=" + std::to_string(s.n) + " dim=" + std::to_string(s.dim) +
                     " groups=" + std::to_string(s.groups));
        const int64_t z_stride = s.dim + s.z_padding;
        const std::vector<float> y = random_values(rng, s.n * s.dim, -2.0f, 2.0f);
        const std::vector<float> z = random_strided_rows(rng, s.n, s.dim, z_stride, -4.0f, 4.0f);
        const std::vector<float> weight = random_values(rng, s.dim, -1.5f, 1.5f);
        const float eps = 1e-5f;
        std::vector<float> serial = y, pooled = y;  // normalised in place
        gated_group_rmsnorm(serial.data(), z.data(), z_stride, weight.data(), s.n, s.dim, s.groups, eps, nullptr);
        gated_group_rmsnorm(pooled.data(), z.data(), z_stride, weight.data(), s.n, s.dim, s.groups, eps, &pool);
        EXPECT_LE(relative_error(serial, gated_group_rmsnorm_reference(y, z, z_stride, weight, s.n, s.dim,
                                                                       s.groups, eps)),
                  kTolerance);
        EXPECT_TRUE(bit_identical(serial, pooled));
    }
}

// ---------------------------------------------------------------------------------------------
// Mamba-2 depthwise causal convolution

struct ConvReference {
    std::vector<double> out;  // [n, channels]
    std::vector<float> ring;  // the last kernel-1 inputs, oldest first: plain copies, so exact
};

// out[t][c] = silu(bias[c] + Σ_j taps[c][j] · input[t - (kernel-1) + j][c]), where the inputs before
// the first new token are the history, oldest first.
ConvReference conv_reference(const std::vector<float>& x, int64_t x_stride, int64_t n, int64_t channels,
                             const std::vector<float>& taps, const float* bias, int64_t kernel,
                             const std::vector<float>& history) {
    const int64_t past = kernel - 1;
    auto input = [&](int64_t t, int64_t c) -> float {
        return t < 0 ? history[(t + past) * channels + c] : x[t * x_stride + c];
    };
    ConvReference ref;
    ref.out.resize(static_cast<size_t>(n * channels));
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t c = 0; c < channels; ++c) {
            double acc = bias != nullptr ? bias[c] : 0.0;
            for (int64_t j = 0; j < kernel; ++j) {
                acc += static_cast<double>(taps[c * kernel + j]) * input(t - past + j, c);
            }
            ref.out[t * channels + c] = silu_ref(acc);
        }
    }
    ref.ring.resize(static_cast<size_t>(past * channels));
    for (int64_t j = 0; j < past; ++j) {
        for (int64_t c = 0; c < channels; ++c) ref.ring[j * channels + c] = input(n - past + j, c);
    }
    return ref;
}

struct ConvShape {
    int64_t n, channels, kernel, x_padding;
    bool with_bias;
};

const ConvShape kConvShapes[] = {
    {1, 1, 4, 0, true},   {13, 7, 4, 3, true},   {13, 130, 4, 11, true}, {5, 65, 2, 1, false},
    {9, 33, 3, 0, true},  {6, 5, 1, 2, true},    {2, 200, 4, 0, true},   {40, 1000, 4, 5, true},
};

void check_conv_against_reference(bool random_history, uint32_t seed) {
    ThreadPool pool(2);
    std::mt19937 rng(seed);
    for (const ConvShape& s : kConvShapes) {
        SCOPED_TRACE("n=" + std::to_string(s.n) + " channels=" + std::to_string(s.channels) +
                     " kernel=" + std::to_string(s.kernel));
        const int64_t x_stride = s.channels + s.x_padding;
        const std::vector<float> x = random_strided_rows(rng, s.n, s.channels, x_stride, -2.0f, 2.0f);
        const std::vector<float> taps = random_values(rng, s.channels * s.kernel);
        const std::vector<float> bias = random_values(rng, s.channels, -0.5f, 0.5f);
        const float* bias_ptr = s.with_bias ? bias.data() : nullptr;
        const int64_t ring_size = (s.kernel - 1) * s.channels;
        const std::vector<float> history =
            random_history ? random_values(rng, ring_size, -2.0f, 2.0f) : std::vector<float>(ring_size, 0.0f);

        std::vector<float> ring_serial = history, ring_pooled = history;
        std::vector<float> serial(static_cast<size_t>(s.n * s.channels)), pooled(serial.size());
        causal_conv1d_silu(x.data(), x_stride, s.n, s.channels, taps.data(), bias_ptr, s.kernel, ring_serial.data(),
                           serial.data(), nullptr);
        causal_conv1d_silu(x.data(), x_stride, s.n, s.channels, taps.data(), bias_ptr, s.kernel, ring_pooled.data(),
                           pooled.data(), &pool);

        const ConvReference ref = conv_reference(x, x_stride, s.n, s.channels, taps, bias_ptr, s.kernel, history);
        EXPECT_LE(relative_error(serial, ref.out), kTolerance);
        EXPECT_TRUE(bit_identical(ring_serial, ref.ring)) << "the ring must hold the last kernel-1 inputs";
        EXPECT_TRUE(bit_identical(serial, pooled));
        EXPECT_TRUE(bit_identical(ring_serial, ring_pooled));
    }
}

TEST(CpuOpsConv, ZeroHistoryMatchesReference) { check_conv_against_reference(false, 201); }

// A non-zero history checks that the ring is read oldest first.
TEST(CpuOpsConv, RandomHistoryMatchesReference) { check_conv_against_reference(true, 202); }

// Decoding a sequence in pieces with the ring carried between them must give exactly what one
// call over the whole sequence gives: each output is the same sum of the same inputs.
TEST(CpuOpsConv, PiecesWithCarriedRingEqualOneCall) {
    struct Case {
        int64_t channels, kernel, x_padding;
        std::vector<int64_t> pieces;
    };
    const std::vector<Case> cases = {
        {130, 4, 3, {7, 1, 5}},  // a 1-token piece is shorter than the ring
        {9, 4, 0, {1, 2, 10}},
        {67, 2, 1, {7, 1, 5}},
        {33, 3, 2, {1, 1, 1, 1, 4}},
        {2100, 4, 1, {7, 1, 5}},  // wide enough to be split between threads even for one token
    };
    ThreadPool pool(2);
    std::mt19937 rng(203);
    for (const Case& c : cases) {
        const int64_t n = std::accumulate(c.pieces.begin(), c.pieces.end(), int64_t{0});
        SCOPED_TRACE("channels=" + std::to_string(c.channels) + " kernel=" + std::to_string(c.kernel));
        const int64_t x_stride = c.channels + c.x_padding;
        const std::vector<float> x = random_strided_rows(rng, n, c.channels, x_stride, -2.0f, 2.0f);
        const std::vector<float> taps = random_values(rng, c.channels * c.kernel);
        const std::vector<float> bias = random_values(rng, c.channels, -0.5f, 0.5f);
        const std::vector<float> history = random_values(rng, (c.kernel - 1) * c.channels, -2.0f, 2.0f);

        std::vector<float> ring_whole = history;
        std::vector<float> whole(static_cast<size_t>(n * c.channels));
        causal_conv1d_silu(x.data(), x_stride, n, c.channels, taps.data(), bias.data(), c.kernel, ring_whole.data(),
                           whole.data(), nullptr);

        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            SCOPED_TRACE(p != nullptr ? "with pool" : "without pool");
            std::vector<float> ring = history;
            std::vector<float> pieced(whole.size());
            int64_t start = 0;
            for (int64_t len : c.pieces) {
                causal_conv1d_silu(x.data() + start * x_stride, x_stride, len, c.channels, taps.data(), bias.data(),
                                   c.kernel, ring.data(), pieced.data() + start * c.channels, p);
                start += len;
            }
            EXPECT_TRUE(bit_identical(pieced, whole));
            EXPECT_TRUE(bit_identical(ring, ring_whole));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Mamba-2 selective scan

struct ScanShape {
    int64_t n, heads, head_dim, groups, state_size, x_padding, dt_padding;
};

struct ScanProblem {
    ScanShape shape;
    int64_t inner, x_stride, dt_stride;
    std::vector<float> x;  // [n, x_stride]: x, B, C, then NaN padding
    std::vector<float> dt;  // [n, dt_stride], before bias and softplus
    std::vector<float> dt_bias, a, d, initial_state;
    float dt_min = 0.0f, dt_max = kInfinity;

    ScanProblem(const ScanShape& s, std::mt19937& rng, float dt_lo = -2.0f, float dt_hi = 1.0f) : shape(s) {
        inner = s.heads * s.head_dim;
        x_stride = inner + 2 * s.groups * s.state_size + s.x_padding;
        dt_stride = s.heads + s.dt_padding;
        x = random_strided_rows(rng, s.n, inner + 2 * s.groups * s.state_size, x_stride);
        dt = random_strided_rows(rng, s.n, s.heads, dt_stride, dt_lo, dt_hi);
        dt_bias = random_values(rng, s.heads, -1.0f, 0.5f);
        // A = -exp(A_log) with A_log in [-1, 1.5]: decays from mild to strong.
        for (float a_log : random_values(rng, s.heads, -1.0f, 1.5f)) a.push_back(-std::exp(a_log));
        d = random_values(rng, s.heads);
        initial_state = random_values(rng, s.heads * s.head_dim * s.state_size);
    }

    // The scan of tokens [start, start + count), continuing from `state`.
    SsmScanArgs args(int64_t start, int64_t count, float* state, float* y) const {
        SsmScanArgs args;
        args.n = count;
        args.heads = shape.heads;
        args.head_dim = shape.head_dim;
        args.groups = shape.groups;
        args.state_size = shape.state_size;
        args.x = x.data() + start * x_stride;
        args.x_stride = x_stride;
        args.dt = dt.data() + start * dt_stride;
        args.dt_stride = dt_stride;
        args.dt_bias = dt_bias.data();
        args.a = a.data();
        args.d = d.data();
        args.dt_min = dt_min;
        args.dt_max = dt_max;
        args.state = state;
        args.y = y + start * inner;
        return args;
    }
};

struct ScanReference {
    std::vector<double> y;      // [n, heads * head_dim]
    std::vector<double> state;  // [heads, head_dim, state_size] after the last token
    int64_t clamped_low = 0, clamped_high = 0;
};

// The state-space dual (matrix) form of Mamba-2, which never runs the recurrence: with the
// cumulative log decay L_t = Σ_{r<=t} dt_r·A,
//   y_t = Σ_{s<=t} (C_t·B_s) · exp(L_t - L_s) · dt_s · x_s  +  exp(L_t) · (C_t · S_0)  +  D · x_t
//   S_n = exp(L_{n-1}) · S_0  +  Σ_s exp(L_{n-1} - L_s) · dt_s · x_s ⊗ B_s
// The first term is the causal kernel matrix M[t][s] = (C_t·B_s) · exp(L_t - L_s) · dt_s applied to x.
ScanReference ssm_scan_dual_reference(const ScanProblem& p, bool apply_clamp = true) {
    const ScanShape& s = p.shape;
    const int64_t ns = s.state_size, heads_per_group = s.heads / s.groups;
    ScanReference ref;
    ref.y.assign(static_cast<size_t>(s.n * p.inner), 0.0);
    ref.state.assign(static_cast<size_t>(s.heads * s.head_dim * ns), 0.0);
    for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t g = h / heads_per_group;
        auto x_at = [&](int64_t t, int64_t i) -> double { return p.x[t * p.x_stride + h * s.head_dim + i]; };
        auto b_at = [&](int64_t t, int64_t k) -> double { return p.x[t * p.x_stride + p.inner + g * ns + k]; };
        auto c_at = [&](int64_t t, int64_t k) -> double {
            return p.x[t * p.x_stride + p.inner + s.groups * ns + g * ns + k];
        };
        auto s0_at = [&](int64_t i, int64_t k) -> double { return p.initial_state[(h * s.head_dim + i) * ns + k]; };

        std::vector<double> dt(static_cast<size_t>(s.n)), log_decay(static_cast<size_t>(s.n));
        double cumulative = 0.0;
        for (int64_t t = 0; t < s.n; ++t) {
            double value = softplus_ref(static_cast<double>(p.dt[t * p.dt_stride + h]) + p.dt_bias[h]);
            if (apply_clamp) {
                if (value < p.dt_min) ++ref.clamped_low;
                if (value > p.dt_max) ++ref.clamped_high;
                value = std::clamp(value, static_cast<double>(p.dt_min), static_cast<double>(p.dt_max));
            }
            dt[t] = value;
            cumulative += value * p.a[h];
            log_decay[t] = cumulative;
        }

        std::vector<double> kernel_matrix(static_cast<size_t>(s.n * s.n), 0.0);  // lower triangular
        for (int64_t t = 0; t < s.n; ++t) {
            for (int64_t u = 0; u <= t; ++u) {
                double cb = 0.0;
                for (int64_t k = 0; k < ns; ++k) cb += c_at(t, k) * b_at(u, k);
                kernel_matrix[t * s.n + u] = cb * std::exp(log_decay[t] - log_decay[u]) * dt[u];
            }
        }

        for (int64_t t = 0; t < s.n; ++t) {
            for (int64_t i = 0; i < s.head_dim; ++i) {
                double acc = 0.0;
                for (int64_t u = 0; u <= t; ++u) acc += kernel_matrix[t * s.n + u] * x_at(u, i);
                double from_initial = 0.0;
                for (int64_t k = 0; k < ns; ++k) from_initial += c_at(t, k) * s0_at(i, k);
                acc += std::exp(log_decay[t]) * from_initial;
                acc += p.d[h] * x_at(t, i);
                ref.y[t * p.inner + h * s.head_dim + i] = acc;
            }
        }

        const double total = log_decay[s.n - 1];
        for (int64_t i = 0; i < s.head_dim; ++i) {
            for (int64_t k = 0; k < ns; ++k) {
                double value = std::exp(total) * s0_at(i, k);
                for (int64_t u = 0; u < s.n; ++u) {
                    value += std::exp(total - log_decay[u]) * dt[u] * x_at(u, i) * b_at(u, k);
                }
                ref.state[(h * s.head_dim + i) * ns + k] = value;
            }
        }
    }
    return ref;
}

struct ScanRun {
    std::vector<float> y, state;
};

ScanRun run_scan(const ScanProblem& p, ThreadPool* pool) {
    ScanRun run{std::vector<float>(static_cast<size_t>(p.shape.n * p.inner), kNaN), p.initial_state};
    ssm_scan(p.args(0, p.shape.n, run.state.data(), run.y.data()), pool);
    return run;
}

TEST(CpuOpsSsmScan, MatchesDualFormReference) {
    // Heads per group 1, 2, 3, 8 and the degenerate one-of-everything shape.
    const ScanShape shapes[] = {
        {1, 1, 1, 1, 1, 0, 0},   {7, 4, 3, 2, 5, 3, 1},  {33, 6, 5, 3, 16, 0, 2},
        {20, 8, 4, 1, 7, 5, 0},  {17, 3, 2, 3, 3, 1, 1}, {64, 4, 16, 2, 32, 0, 0},
    };
    ThreadPool pool(2);
    std::mt19937 rng(301);
    for (const ScanShape& s : shapes) {
        SCOPED_TRACE("n=" + std::to_string(s.n) + " heads=" + std::to_string(s.heads) +
                     " head_dim=" + std::to_string(s.head_dim) + " groups=" + std::to_string(s.groups) +
                     " state=" + std::to_string(s.state_size));
        const ScanProblem problem(s, rng);
        const ScanRun serial = run_scan(problem, nullptr);
        const ScanRun pooled = run_scan(problem, &pool);
        const ScanReference ref = ssm_scan_dual_reference(problem);
        EXPECT_LE(relative_error(serial.y, ref.y), kTolerance);
        EXPECT_LE(relative_error(serial.state, ref.state), kTolerance);
        EXPECT_TRUE(bit_identical(serial.y, pooled.y));
        EXPECT_TRUE(bit_identical(serial.state, pooled.state));
    }
}

// Scanning in pieces with the state carried is the same recurrence step for step, so it must equal
// one scan over the whole sequence exactly.
TEST(CpuOpsSsmScan, PiecesWithCarriedStateEqualOneCall) {
    struct Case {
        ScanShape shape;
        std::vector<int64_t> pieces;
    };
    const std::vector<Case> cases = {
        {{23, 6, 5, 3, 16, 2, 1}, {7, 1, 15}},
        {{13, 4, 3, 1, 7, 0, 0}, {1, 1, 11}},
        {{9, 2, 8, 2, 4, 1, 3}, {4, 5}},
        {{24, 16, 32, 4, 64, 1, 1}, {7, 1, 16}},  // large enough to be split between threads
    };
    ThreadPool pool(2);
    std::mt19937 rng(302);
    for (const Case& c : cases) {
        const ScanProblem problem(c.shape, rng);
        const ScanRun whole = run_scan(problem, nullptr);
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            SCOPED_TRACE(p != nullptr ? "with pool" : "without pool");
            ScanRun pieced{std::vector<float>(whole.y.size(), kNaN), problem.initial_state};
            int64_t start = 0;
            for (int64_t len : c.pieces) {
                ssm_scan(problem.args(start, len, pieced.state.data(), pieced.y.data()), p);
                start += len;
            }
            EXPECT_TRUE(bit_identical(pieced.y, whole.y));
            EXPECT_TRUE(bit_identical(pieced.state, whole.state));
        }
    }
}

// dt after softplus is clamped to [dt_min, dt_max]; the bounds here cut off both ends of the
// random dt, and the result must differ clearly from an unclamped scan so the check has teeth.
TEST(CpuOpsSsmScan, ClampsDtToItsBounds) {
    ThreadPool pool(2);
    std::mt19937 rng(303);
    for (const ScanShape& s : {ScanShape{29, 4, 3, 2, 8, 1, 2}, ScanShape{12, 6, 4, 3, 5, 0, 0}}) {
        ScanProblem problem(s, rng, -6.0f, 4.0f);
        problem.dt_min = 0.05f;
        problem.dt_max = 0.6f;
        const ScanRun serial = run_scan(problem, nullptr);
        const ScanRun pooled = run_scan(problem, &pool);
        const ScanReference ref = ssm_scan_dual_reference(problem);
        ASSERT_GT(ref.clamped_low, 0) << "dt_min must bite for this test to mean anything";
        ASSERT_GT(ref.clamped_high, 0) << "dt_max must bite for this test to mean anything";
        EXPECT_LE(relative_error(serial.y, ref.y), kTolerance);
        EXPECT_LE(relative_error(serial.state, ref.state), kTolerance);
        const ScanReference unclamped = ssm_scan_dual_reference(problem, false);
        EXPECT_GT(relative_error(serial.y, unclamped.y), 1e-2);
        EXPECT_TRUE(bit_identical(serial.y, pooled.y));
        EXPECT_TRUE(bit_identical(serial.state, pooled.state));
    }
}

// Softplus is linear above 20. A dt_raw + dt_bias near 95 overflows exp in float, so a softplus
// without the threshold would turn dt into infinity and the state into NaN.
TEST(CpuOpsSsmScan, LargeDtUsesLinearSoftplus) {
    std::mt19937 rng(304);
    ScanProblem problem({5, 2, 3, 1, 4, 0, 0}, rng);
    problem.dt[2 * problem.dt_stride + 0] = 95.0f;
    problem.dt[3 * problem.dt_stride + 1] = 30.0f;
    const ScanRun run = run_scan(problem, nullptr);
    const ScanReference ref = ssm_scan_dual_reference(problem);
    EXPECT_LE(relative_error(run.y, ref.y), kTolerance);
    EXPECT_LE(relative_error(run.state, ref.state), kTolerance);
}

// ---------------------------------------------------------------------------------------------
// Causal grouped-query attention over a cache

struct AttentionShape {
    int64_t n, pos, heads, kv_heads, head_dim;
};

// Token t sees cache rows [0, pos + t]; query head h reads key/value head h / (heads / kv_heads).
std::vector<double> attention_reference(const AttentionShape& s, const std::vector<float>& q,
                                        const std::vector<float>& k_cache, const std::vector<float>& v_cache,
                                        double scale) {
    const int64_t hd = s.head_dim, kv_width = s.kv_heads * hd, heads_per_kv = s.heads / s.kv_heads;
    std::vector<double> out(static_cast<size_t>(s.n * s.heads * hd), 0.0);
    for (int64_t t = 0; t < s.n; ++t) {
        for (int64_t h = 0; h < s.heads; ++h) {
            const int64_t kvh = h / heads_per_kv, visible = s.pos + t + 1;
            std::vector<double> logits(static_cast<size_t>(visible));
            for (int64_t j = 0; j < visible; ++j) {
                double dot = 0.0;
                for (int64_t i = 0; i < hd; ++i) {
                    dot += static_cast<double>(q[(t * s.heads + h) * hd + i]) * k_cache[j * kv_width + kvh * hd + i];
                }
                logits[j] = dot * scale;
            }
            const double max_logit = *std::max_element(logits.begin(), logits.end());
            double denominator = 0.0;
            for (double l : logits) denominator += std::exp(l - max_logit);
            for (int64_t j = 0; j < visible; ++j) {
                const double p = std::exp(logits[j] - max_logit) / denominator;
                for (int64_t i = 0; i < hd; ++i) {
                    out[(t * s.heads + h) * hd + i] += p * v_cache[j * kv_width + kvh * hd + i];
                }
            }
        }
    }
    return out;
}

TEST(CpuOpsAttention, MatchesReference) {
    // heads / kv_heads of 1, 2 and 4, each with an empty cache (pos = 0) and with earlier rows.
    const AttentionShape shapes[] = {
        {1, 0, 1, 1, 8},   {6, 0, 4, 2, 7},    {5, 0, 8, 2, 16},  {3, 13, 6, 6, 33},
        {1, 20, 4, 2, 64}, {9, 5, 8, 2, 12},   {4, 7, 4, 1, 5},   {17, 0, 3, 3, 1},
        {2, 31, 8, 4, 128}, {33, 40, 8, 2, 64},
    };
    ThreadPool pool(2);
    std::mt19937 rng(401);
    for (const AttentionShape& s : shapes) {
        SCOPED_TRACE("n=" + std::to_string(s.n) + " pos=" + std::to_string(s.pos) + " heads=" +
                     std::to_string(s.heads) + " kv_heads=" + std::to_string(s.kv_heads) +
                     " head_dim=" + std::to_string(s.head_dim));
        const int64_t kv_width = s.kv_heads * s.head_dim;
        // Rows past pos + n are beyond what any token may see: NaN there fails any read of them.
        const int64_t capacity = s.pos + s.n + 3;
        const std::vector<float> q = random_values(rng, s.n * s.heads * s.head_dim, -2.0f, 2.0f);
        std::vector<float> k_cache = random_values(rng, capacity * kv_width, -2.0f, 2.0f);
        std::vector<float> v_cache = random_values(rng, capacity * kv_width);
        std::fill(k_cache.begin() + (s.pos + s.n) * kv_width, k_cache.end(), kNaN);
        std::fill(v_cache.begin() + (s.pos + s.n) * kv_width, v_cache.end(), kNaN);
        const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));

        AttentionArgs args;
        args.n = s.n;
        args.pos = s.pos;
        args.heads = s.heads;
        args.kv_heads = s.kv_heads;
        args.head_dim = s.head_dim;
        args.scale = scale;
        args.q = q.data();
        args.k_cache = k_cache.data();
        args.v_cache = v_cache.data();
        std::vector<float> serial(q.size(), kNaN), pooled(q.size(), kNaN);
        args.out = serial.data();
        attention(args, nullptr);
        args.out = pooled.data();
        attention(args, &pool);

        EXPECT_LE(relative_error(serial, attention_reference(s, q, k_cache, v_cache, scale)), kTolerance);
        EXPECT_TRUE(bit_identical(serial, pooled));
    }
}

// ---------------------------------------------------------------------------------------------
// Sigmoid top-k routing

struct RouteReference {
    std::vector<int32_t> experts;  // best first
    std::vector<double> weights;
    // The smallest gap between scores whose order decides the result. A float kernel may order a
    // gap below its rounding either way, so random cases with a tiny margin are not a fair check.
    double margin = kInfinity;
};

// Indices by value, largest first, ties to the lower index.
std::vector<int32_t> ranking(const std::vector<double>& values) {
    std::vector<int32_t> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return values[a] > values[b]; });
    return order;
}

// Plain sigmoid top-k, or DeepSeek-V3's group-limited version when there are several groups:
// a group scores the sum of its two best biased scores, only the best `groups_kept` groups stay,
// the other groups' experts get a choice score of 0 (not -infinity), then top-k over all experts.
// Weights come from the unbiased scores.
RouteReference route_reference(const std::vector<double>& logits, const float* bias, const MoeRouting& routing) {
    const int64_t experts = static_cast<int64_t>(logits.size());
    std::vector<double> score(logits.size()), choice(logits.size());
    for (int64_t e = 0; e < experts; ++e) {
        score[e] = sigmoid_ref(logits[e]);
        choice[e] = score[e] + (bias != nullptr ? bias[e] : 0.0);
    }
    RouteReference ref;
    if (routing.groups > 1) {
        const int64_t per_group = experts / routing.groups;
        std::vector<double> group_score(static_cast<size_t>(routing.groups));
        for (int64_t g = 0; g < routing.groups; ++g) {
            std::vector<double> members(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
            std::sort(members.begin(), members.end(), std::greater<>());
            group_score[g] = members[0] + (per_group > 1 ? members[1] : 0.0);
        }
        const std::vector<int32_t> group_order = ranking(group_score);
        if (routing.groups_kept < routing.groups) {
            ref.margin = group_score[group_order[routing.groups_kept - 1]] -
                         group_score[group_order[routing.groups_kept]];
        }
        for (int64_t rank = routing.groups_kept; rank < routing.groups; ++rank) {
            const int64_t g = group_order[rank];
            for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) choice[e] = 0.0;
        }
    }
    const std::vector<int32_t> order = ranking(choice);
    for (int64_t i = 0; i < routing.top_k && i + 1 < experts; ++i) {
        ref.margin = std::min(ref.margin, choice[order[i]] - choice[order[i + 1]]);
    }
    double sum = 0.0;
    for (int64_t i = 0; i < routing.top_k; ++i) sum += score[order[i]];
    for (int64_t i = 0; i < routing.top_k; ++i) {
        ref.experts.push_back(order[i]);
        const double s = score[order[i]];
        ref.weights.push_back((routing.normalize ? s / (sum + 1e-20) : s) * routing.scale);
    }
    return ref;
}

std::vector<ExpertChoice> route(const std::vector<float>& logits, const float* bias, const MoeRouting& routing) {
    std::vector<ExpertChoice> out(static_cast<size_t>(routing.top_k), ExpertChoice{-1, kNaN});
    route_sigmoid_topk(logits.data(), bias, static_cast<int64_t>(logits.size()), routing, out.data());
    return out;
}

std::vector<double> widen(const std::vector<float>& values) { return {values.begin(), values.end()}; }

// Same experts in the same order, weights equal to float rounding.
::testing::AssertionResult routes_match(const std::vector<ExpertChoice>& actual, const RouteReference& expected) {
    std::ostringstream got, want;
    bool same = actual.size() == expected.experts.size();
    for (size_t i = 0; i < actual.size(); ++i) got << actual[i].expert << ":" << actual[i].weight << " ";
    for (size_t i = 0; i < expected.experts.size(); ++i) {
        want << expected.experts[i] << ":" << expected.weights[i] << " ";
    }
    for (size_t i = 0; same && i < actual.size(); ++i) {
        same = actual[i].expert == expected.experts[i] &&
               std::fabs(actual[i].weight - expected.weights[i]) <=
                   1e-6 * std::max(1.0, std::fabs(expected.weights[i]));
    }
    if (same) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got [" << got.str() << "] expected [" << want.str() << "]";
}

MoeRouting make_routing(int64_t top_k, int64_t groups, int64_t groups_kept, bool normalize, float scale) {
    MoeRouting routing;
    routing.top_k = top_k;
    routing.groups = groups;
    routing.groups_kept = groups_kept;
    routing.normalize = normalize;
    routing.scale = scale;
    return routing;
}

TEST(CpuOpsRouting, RandomLogitsMatchReference) {
    struct Config {
        int64_t experts, top_k, groups, groups_kept;
        bool normalize, with_bias;
        float scale;
    };
    const Config configs[] = {
        {8, 2, 1, 1, true, true, 1.0f},    {16, 4, 1, 1, true, true, 2.5f},  {64, 6, 1, 1, false, true, 1.0f},
        {7, 3, 1, 1, true, false, 1.0f},   {16, 4, 4, 2, true, true, 2.5f},  {32, 8, 8, 4, true, true, 1.0f},
        {16, 1, 4, 1, false, true, 1.5f},  {12, 12, 1, 1, true, true, 1.0f},
    };
    std::mt19937 rng(501);
    for (const Config& c : configs) {
        SCOPED_TRACE("experts=" + std::to_string(c.experts) + " top_k=" + std::to_string(c.top_k) +
                     " groups=" + std::to_string(c.groups) + "/" + std::to_string(c.groups_kept));
        const MoeRouting routing = make_routing(c.top_k, c.groups, c.groups_kept, c.normalize, c.scale);
        int checked = 0;
        const int trials = 200;
        for (int trial = 0; trial < trials; ++trial) {
            const std::vector<float> logits = random_values(rng, c.experts, -4.0f, 4.0f);
            const std::vector<float> bias = random_values(rng, c.experts, -0.3f, 0.3f);
            const float* bias_ptr = c.with_bias ? bias.data() : nullptr;
            const RouteReference ref = route_reference(widen(logits), bias_ptr, routing);
            if (ref.margin < 1e-6) continue;
            ++checked;
            EXPECT_TRUE(routes_match(route(logits, bias_ptr, routing), ref)) << "trial " << trial;
        }
        EXPECT_GE(checked, trials * 9 / 10);
    }
}

// The bias moves an expert into the top k, but the weights are the unbiased sigmoid scores.
TEST(CpuOpsRouting, BiasChangesChoiceButNotWeights) {
    const std::vector<float> logits = {2.0f, 1.5f, -1.0f, 0.3f, -2.0f, 0.1f, -0.5f, 0.0f};
    std::vector<float> bias(logits.size(), 0.0f);
    bias[6] = 0.6f;   // sigmoid(-0.5) + 0.6 = 0.978 > sigmoid(2) = 0.881 > sigmoid(1.5) = 0.818
    bias[3] = -0.1f;  // a negative bias on an expert that is not chosen either way
    for (bool normalize : {true, false}) {
        SCOPED_TRACE(normalize ? "normalized" : "not normalized");
        const MoeRouting routing = make_routing(2, 1, 1, normalize, 2.5f);
        const std::vector<ExpertChoice> unbiased = route(logits, nullptr, routing);
        ASSERT_EQ(unbiased[0].expert, 0);
        ASSERT_EQ(unbiased[1].expert, 1);

        const std::vector<ExpertChoice> biased = route(logits, bias.data(), routing);
        ASSERT_EQ(biased[0].expert, 6);
        ASSERT_EQ(biased[1].expert, 0);
        const double s6 = sigmoid_ref(-0.5), s0 = sigmoid_ref(2.0);
        const double denominator = normalize ? s6 + s0 : 1.0;
        EXPECT_NEAR(biased[0].weight, s6 / denominator * 2.5, 1e-6);
        EXPECT_NEAR(biased[1].weight, s0 / denominator * 2.5, 1e-6);
        EXPECT_TRUE(routes_match(biased, route_reference(widen(logits), bias.data(), routing)));
    }
}

TEST(CpuOpsRouting, TiesGoToTheLowerIndex) {
    const std::vector<float> all_equal(10, 0.7f);
    const MoeRouting routing = make_routing(3, 1, 1, true, 1.0f);
    const std::vector<ExpertChoice> chosen = route(all_equal, nullptr, routing);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(chosen[i].expert, i);
        EXPECT_NEAR(chosen[i].weight, 1.0 / 3.0, 1e-6);
    }

    // Experts 1, 2 and 4 tie for first; the top two are 1 and 2.
    const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f, 3.0f, 2.0f};
    const MoeRouting top2 = make_routing(2, 1, 1, false, 1.0f);
    const std::vector<ExpertChoice> top = route(logits, nullptr, top2);
    EXPECT_EQ(top[0].expert, 1);
    EXPECT_EQ(top[1].expert, 2);
    EXPECT_TRUE(routes_match(top, route_reference(widen(logits), nullptr, top2)));
}

// Expert 0 is the best single expert, but its group's second best is poor, so the group is not
// kept and expert 0 may not be chosen.
TEST(CpuOpsRouting, GroupLimitedChoiceDropsAStrongExpertInAWeakGroup) {
    const std::vector<float> logits = {
        5.0f,  -5.0f, -5.0f, -5.0f,  // group 0: 0.993 + 0.007 = 1.00
        1.0f,  1.0f,  -3.0f, 0.2f,   // group 1: 0.731 + 0.731 = 1.46
        0.8f,  -4.0f, 0.8f,  0.5f,   // group 2: 0.690 + 0.690 = 1.38
        -1.0f, 0.0f,  -2.0f, -1.5f,  // group 3: 0.500 + 0.269 = 0.77
    };
    const MoeRouting routing = make_routing(4, 4, 2, true, 2.5f);
    const std::vector<ExpertChoice> chosen = route(logits, nullptr, routing);
    const std::vector<int32_t> expected = {4, 5, 8, 10};
    for (int i = 0; i < 4; ++i) EXPECT_EQ(chosen[i].expert, expected[i]);
    EXPECT_TRUE(routes_match(chosen, route_reference(widen(logits), nullptr, routing)));

    // Without groups expert 0 comes first.
    EXPECT_EQ(route(logits, nullptr, make_routing(4, 1, 1, true, 2.5f))[0].expert, 0);
}

// The dropped groups' experts score 0, not -infinity, as in the reference implementation: when
// every kept expert's biased score is negative, the zeros of the dropped groups rank above them.
TEST(CpuOpsRouting, DroppedGroupsScoreZeroNotMinusInfinity) {
    std::mt19937 rng(502);
    const std::vector<float> logits = random_values(rng, 16, -2.0f, 2.0f);
    const std::vector<float> bias(16, -2.0f);  // biased scores all in (-2, -1)
    const MoeRouting routing = make_routing(2, 4, 2, true, 1.0f);
    const RouteReference ref = route_reference(widen(logits), bias.data(), routing);
    const std::vector<ExpertChoice> chosen = route(logits, bias.data(), routing);
    EXPECT_TRUE(routes_match(chosen, ref));
    // The chosen experts are the two lowest-indexed ones of the lowest-indexed dropped group.
    std::vector<double> group_score(4);
    for (int g = 0; g < 4; ++g) {
        std::vector<double> members;
        for (int e = 4 * g; e < 4 * g + 4; ++e) members.push_back(sigmoid_ref(logits[e]) + bias[e]);
        std::sort(members.begin(), members.end(), std::greater<>());
        group_score[g] = members[0] + members[1];
    }
    const std::vector<int32_t> group_order = ranking(group_score);
    const int32_t first_dropped = std::min(group_order[2], group_order[3]);
    ASSERT_EQ(chosen.size(), 2u);
    EXPECT_EQ(chosen[0].expert, first_dropped * 4);
    EXPECT_EQ(chosen[1].expert, first_dropped * 4 + 1);
}

// ---------------------------------------------------------------------------------------------
// Mixture of relu² experts

// A random weight matrix held the way the checkpoint would hold it; for BF16 the values are rounded
// once here, and at() reads exactly what the kernel reads.
struct TestMatrix {
    DType dtype = DType::F32;
    int64_t rows = 0, cols = 0;
    std::vector<float> f32;
    std::vector<uint16_t> bf16;

    TestMatrix() = default;
    TestMatrix(std::mt19937& rng, DType dtype_, int64_t rows_, int64_t cols_, float range)
        : dtype(dtype_), rows(rows_), cols(cols_), f32(random_values(rng, rows_ * cols_, -range, range)) {
        if (dtype == DType::BF16) {
            for (float v : f32) bf16.push_back(f32_to_bf16(v));
        }
    }

    double at(int64_t r, int64_t c) const {
        return dtype == DType::BF16 ? bf16_to_f32(bf16[r * cols + c]) : f32[r * cols + c];
    }

    MatrixView view() const {
        const void* data = dtype == DType::BF16 ? static_cast<const void*>(bf16.data()) : f32.data();
        return MatrixView{dtype, rows, cols, data};
    }
};

// down · relu²(up · x) for one token.
std::vector<double> relu2_mlp_reference(const TestMatrix& up, const TestMatrix& down, const float* x) {
    std::vector<double> mid(static_cast<size_t>(up.rows));
    for (int64_t i = 0; i < up.rows; ++i) {
        double acc = 0.0;
        for (int64_t c = 0; c < up.cols; ++c) acc += up.at(i, c) * x[c];
        mid[i] = relu2_ref(acc);
    }
    std::vector<double> out(static_cast<size_t>(down.rows));
    for (int64_t r = 0; r < down.rows; ++r) {
        double acc = 0.0;
        for (int64_t i = 0; i < down.cols; ++i) acc += down.at(r, i) * mid[i];
        out[r] = acc;
    }
    return out;
}

const char* dtype_label(DType dtype) { return dtype == DType::BF16 ? "BF16" : "F32"; }

struct MoeProblem {
    int64_t experts, hidden, inter, shared_inter;
    TestMatrix router, shared_up, shared_down;
    std::vector<TestMatrix> up, down;
    std::vector<float> score_bias;

    MoeProblem(std::mt19937& rng, DType dtype, int64_t experts_, int64_t hidden_, int64_t inter_,
               int64_t shared_inter_)
        : experts(experts_), hidden(hidden_), inter(inter_), shared_inter(shared_inter_) {
        const float in_range = 2.0f / std::sqrt(static_cast<float>(hidden));
        // A wider router spreads the logits, so the routing has clear winners.
        router = TestMatrix(rng, dtype, experts, hidden, 3.0f * in_range);
        for (int64_t e = 0; e < experts; ++e) {
            up.emplace_back(rng, dtype, inter, hidden, in_range);
            down.emplace_back(rng, dtype, hidden, inter, 2.0f / std::sqrt(static_cast<float>(inter)));
        }
        shared_up = TestMatrix(rng, dtype, shared_inter, hidden, in_range);
        shared_down = TestMatrix(rng, dtype, hidden, shared_inter, 2.0f / std::sqrt(static_cast<float>(shared_inter)));
        score_bias = random_values(rng, experts, -0.2f, 0.2f);
    }

    MoeWeights weights() const {
        MoeWeights w;
        w.router = router.view();
        w.score_bias = score_bias.data();
        for (int64_t e = 0; e < experts; ++e) {
            w.up.push_back(up[e].view());
            w.down.push_back(down[e].view());
        }
        w.shared_up = shared_up.view();
        w.shared_down = shared_down.view();
        return w;
    }
};

TEST(CpuOpsMoe, MatchesDenseReference) {
    struct Config {
        int64_t experts, top_k, groups, groups_kept;
        bool normalize;
        float scale;
        int64_t hidden, inter, shared_inter;
    };
    const Config configs[] = {
        {8, 2, 1, 1, true, 1.0f, 37, 19, 23},
        {16, 4, 1, 1, false, 2.5f, 37, 19, 23},
        {16, 4, 4, 2, true, 2.5f, 37, 19, 23},
        // Large enough for the expert and shared matmuls to be split between threads.
        {16, 4, 4, 2, true, 2.5f, 256, 384, 512},
    };
    ThreadPool pool(2);
    uint32_t seed = 602;
    for (DType dtype : {DType::F32, DType::BF16}) {
        for (const Config& c : configs) {
            for (int64_t n : {1, 3, 17}) {
                SCOPED_TRACE(std::string(dtype_label(dtype)) + " experts=" + std::to_string(c.experts) +
                             " top_k=" + std::to_string(c.top_k) + " groups=" + std::to_string(c.groups) +
                             " hidden=" + std::to_string(c.hidden) + " n=" + std::to_string(n));
                std::mt19937 rng(seed++);
                const int64_t hidden = c.hidden;
                const MoeProblem problem(rng, dtype, c.experts, hidden, c.inter, c.shared_inter);
                const MoeRouting routing = make_routing(c.top_k, c.groups, c.groups_kept, c.normalize, c.scale);
                const std::vector<float> x = random_values(rng, n * hidden);

                // Dense reference: every token routed on its own, every expert computed in full.
                std::vector<double> expected(static_cast<size_t>(n * hidden), 0.0);
                for (int64_t t = 0; t < n; ++t) {
                    const float* xt = x.data() + t * hidden;
                    std::vector<double> logits(static_cast<size_t>(c.experts), 0.0);
                    for (int64_t e = 0; e < c.experts; ++e) {
                        for (int64_t i = 0; i < hidden; ++i) logits[e] += problem.router.at(e, i) * xt[i];
                    }
                    const RouteReference chosen = route_reference(logits, problem.score_bias.data(), routing);
                    // The kernel's logits carry float rounding; a near-tie would make the check unfair.
                    ASSERT_GT(chosen.margin, 1e-5) << "token " << t << ": pick another seed";
                    double* out = expected.data() + t * hidden;
                    for (size_t i = 0; i < chosen.experts.size(); ++i) {
                        const int32_t e = chosen.experts[i];
                        const std::vector<double> y = relu2_mlp_reference(problem.up[e], problem.down[e], xt);
                        for (int64_t r = 0; r < hidden; ++r) out[r] += chosen.weights[i] * y[r];
                    }
                    const std::vector<double> shared = relu2_mlp_reference(problem.shared_up, problem.shared_down, xt);
                    for (int64_t r = 0; r < hidden; ++r) out[r] += shared[r];
                }

                const MoeWeights weights = problem.weights();
                std::vector<float> serial(static_cast<size_t>(n * hidden), kNaN), pooled(serial.size(), kNaN);
                moe_relu2(x.data(), n, weights, routing, serial.data(), nullptr);
                moe_relu2(x.data(), n, weights, routing, pooled.data(), &pool);
                EXPECT_LE(relative_error(serial, expected), kTolerance);
                EXPECT_TRUE(bit_identical(serial, pooled));
            }
        }
    }
}

// Backend::moe_relu2 normalises its input and adds the layer to the residual stream it is given: the
// stream after it is the stream before plus what the kernel alone computes on the normalised input.
TEST(CpuMoe, BackendAddsTheLayerToTheStream) {
    std::mt19937 rng(77);
    const int64_t n = 3, hidden = 32;
    const MoeProblem problem(rng, DType::BF16, 8, hidden, 16, 24);
    const MoeRouting routing = make_routing(2, 1, 1, true, 1.0f);
    const MoeWeights weights = problem.weights();
    const std::vector<float> x = random_values(rng, n * hidden), norm = random_values(rng, hidden, 0.5f, 1.5f);
    std::vector<float> normed(static_cast<size_t>(n * hidden), kNaN), alone(normed.size(), kNaN);
    rmsnorm(x.data(), norm.data(), n, hidden, 1e-5f, normed.data(), nullptr);
    moe_relu2(normed.data(), n, weights, routing, alone.data(), nullptr);
    const std::vector<float> before = random_values(rng, n * hidden);
    std::vector<float> stream = before, scratch(normed.size(), kNaN);
    make_cpu_backend(nullptr)->moe_relu2(MoeInput{x.data(), norm.data(), 1e-5f, scratch.data()}, n, weights, routing,
                                         stream.data());
    EXPECT_EQ(scratch, normed);
    for (size_t i = 0; i < stream.size(); ++i) ASSERT_EQ(stream[i], before[i] + alone[i]) << "value " << i;
}

}  // namespace
}  // namespace duet::cpu
