// The CPU kernels the speech encoders add (LayerNorm, exact GELU, bidirectional attention over the
// valid frames), each against a double-precision reference written from the formula, on random
// inputs; pooled and single-threaded runs must be bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/thread_pool.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/bidirectional_attention.h"
#include "kernels/cpu/layer_norm.h"
#include "kernel_test_support.h"

namespace duet::cpu {
namespace {

using duet::testing::bit_identical;
using duet::testing::random_values;
using duet::testing::relative_error;

constexpr double kTolerance = 1e-5;

TEST(CpuOpsSpeech, LayerNormMatchesReference) {
    ThreadPool pool(2);
    std::mt19937 rng(301);
    for (auto [n, dim] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {17, 64}, {40, 1280}}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " dim=" + std::to_string(dim));
        const std::vector<float> x = random_values(rng, n * dim, -3.0f, 2.0f);
        const std::vector<float> weight = random_values(rng, dim, -1.5f, 1.5f), bias = random_values(rng, dim);
        std::vector<double> expected(x.size());
        for (int64_t t = 0; t < n; ++t) {
            double mean = 0.0, var = 0.0;
            for (int64_t i = 0; i < dim; ++i) mean += x[t * dim + i];
            mean /= dim;
            for (int64_t i = 0; i < dim; ++i) var += (x[t * dim + i] - mean) * (x[t * dim + i] - mean);
            var /= dim;
            for (int64_t i = 0; i < dim; ++i) {
                expected[t * dim + i] = (x[t * dim + i] - mean) / std::sqrt(var + 1e-5) * weight[i] + bias[i];
            }
        }
        std::vector<float> pooled(x.size()), alone(x.size());
        layer_norm(x.data(), n, dim, weight.data(), bias.data(), 1e-5f, pooled.data(), &pool);
        layer_norm(x.data(), n, dim, weight.data(), bias.data(), 1e-5f, alone.data(), nullptr);
        EXPECT_LT(relative_error(pooled, expected), kTolerance);
        EXPECT_TRUE(bit_identical(pooled, alone));
    }
}

TEST(CpuOpsSpeech, ExactGeluMatchesReference) {
    std::mt19937 rng(302);
    const std::vector<float> x = random_values(rng, 1000, -6.0f, 6.0f);
    std::vector<float> actual(x.size());
    std::vector<double> expected(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        actual[i] = gelu(x[i]);
        expected[i] = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    }
    EXPECT_LT(relative_error(actual, expected), 1e-6);
}

TEST(CpuOpsSpeech, BidirectionalAttentionMatchesReference) {
    ThreadPool pool(2);
    std::mt19937 rng(303);
    struct Shape {
        int64_t n, keys, heads, head_dim;
    };
    for (Shape s : {Shape{1, 1, 1, 4}, Shape{5, 3, 2, 8}, Shape{30, 29, 4, 16}, Shape{64, 50, 8, 64}}) {
        SCOPED_TRACE("n=" + std::to_string(s.n) + " keys=" + std::to_string(s.keys));
        const int64_t width = s.heads * s.head_dim, stride = 3 * width + 5;  // rows wider than q|k|v
        const std::vector<float> qkv = random_values(rng, s.n * stride, -2.0f, 2.0f);
        const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
        std::vector<double> expected(static_cast<size_t>(s.n * width), 0.0);
        for (int64_t t = 0; t < s.n; ++t) {
            for (int64_t h = 0; h < s.heads; ++h) {
                std::vector<double> w(static_cast<size_t>(s.keys));
                double max_w = -1e300, sum = 0.0;
                for (int64_t j = 0; j < s.keys; ++j) {
                    double dot = 0.0;
                    for (int64_t d = 0; d < s.head_dim; ++d) {
                        dot += double(qkv[t * stride + h * s.head_dim + d]) *
                               qkv[j * stride + width + h * s.head_dim + d];
                    }
                    w[j] = dot * scale;
                    max_w = std::max(max_w, w[j]);
                }
                for (double& v : w) sum += (v = std::exp(v - max_w));
                for (int64_t j = 0; j < s.keys; ++j) {
                    for (int64_t d = 0; d < s.head_dim; ++d) {
                        expected[t * width + h * s.head_dim + d] +=
                            w[j] / sum * qkv[j * stride + 2 * width + h * s.head_dim + d];
                    }
                }
            }
        }
        BidirectionalAttentionArgs a;
        a.n = s.n;
        a.keys = s.keys;
        a.heads = s.heads;
        a.head_dim = s.head_dim;
        a.scale = static_cast<float>(scale);
        a.q = qkv.data();
        a.k = qkv.data() + width;
        a.v = qkv.data() + 2 * width;
        a.stride = stride;
        std::vector<float> pooled(expected.size()), alone(expected.size());
        a.out = pooled.data();
        bidirectional_attention(a, &pool);
        a.out = alone.data();
        bidirectional_attention(a, nullptr);
        EXPECT_LT(relative_error(pooled, expected), kTolerance);
        EXPECT_TRUE(bit_identical(pooled, alone));
    }
}

}  // namespace
}  // namespace duet::cpu
