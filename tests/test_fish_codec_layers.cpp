// The codec's CPU layers against plain references on random inputs, whole and in chunks.
#include <cmath>
#include <random>

#include "base/half.h"
#include "kernels/cpu/simd_level.h"
#include "models/fish_codec/layers.h"
#include "test_support.h"

namespace duet::fish_codec {
namespace {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale = 1.0f) {
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

// PyTorch's Conv1d on [C, T] input left-padded with (k - 1)·d + 1 - s zeros; x and out time-major.
std::vector<float> reference_conv(const std::vector<float>& w_oik, const std::vector<float>& bias, int64_t in,
                                  int64_t out, int64_t k, int64_t d, int64_t s, const std::vector<float>& x,
                                  int64_t steps) {
    const int64_t pad = (k - 1) * d + 1 - s, out_steps = steps / s;
    std::vector<float> y(static_cast<size_t>(out_steps * out));
    for (int64_t t = 0; t < out_steps; ++t)
        for (int64_t o = 0; o < out; ++o) {
            double acc = bias[static_cast<size_t>(o)];
            for (int64_t i = 0; i < in; ++i)
                for (int64_t j = 0; j < k; ++j) {
                    const int64_t src = t * s + j * d - pad;
                    if (src >= 0) acc += w_oik[static_cast<size_t>((o * in + i) * k + j)] * x[static_cast<size_t>(src * in + i)];
                }
            y[static_cast<size_t>(t * out + o)] = static_cast<float>(acc);
        }
    return y;
}

TEST(FishCodecLayers, CausalConvMatchesReferenceWholeAndChunked) {
    std::mt19937 rng(1);
    ThreadPool pool(2);
    for (auto [k, d, s] : {std::tuple{7, 3, 1}, std::tuple{4, 1, 2}, std::tuple{1, 1, 1}, std::tuple{3, 1, 1}}) {
        const int64_t in = 5, out = 6, steps = 48;
        const auto w = random_vector(static_cast<size_t>(out * in * k), rng);
        Conv conv;
        conv.in = in, conv.out = out, conv.kernel = k, conv.dilation = d, conv.stride = s;
        conv.weight.resize(w.size());
        for (int64_t o = 0; o < out; ++o)
            for (int64_t i = 0; i < in; ++i)
                for (int64_t j = 0; j < k; ++j) conv.weight[size_t((o * k + j) * in + i)] = w[size_t((o * in + i) * k + j)];
        conv.bias = random_vector(static_cast<size_t>(out), rng);
        const auto x = random_vector(static_cast<size_t>(steps * in), rng);
        const auto expected = reference_conv(w, conv.bias, in, out, k, d, s, x, steps);

        ConvState whole_state = new_state(conv);
        EXPECT_LT(testing::max_abs_difference(causal_conv(conv, whole_state, x.data(), steps, &pool), expected), 1e-5);
        ConvState state = new_state(conv);
        std::vector<float> chunked;
        for (int64_t at = 0, n = s; at < steps; at += n, n = std::min(steps - at, n * 2)) {
            const auto part = causal_conv(conv, state, x.data() + at * in, n, &pool);
            chunked.insert(chunked.end(), part.begin(), part.end());
        }
        EXPECT_LT(testing::max_abs_difference(chunked, expected), 1e-5) << "k " << k << " d " << d << " s " << s;
    }
}

TEST(FishCodecLayers, ConvTransposeMatchesReferenceWholeAndChunked) {
    std::mt19937 rng(2);
    for (auto [k, s] : {std::pair{6, 3}, std::pair{2, 2}}) {
        const int64_t in = 4, out = 3, steps = 10;
        const auto w = random_vector(static_cast<size_t>(in * out * k), rng);  // torch [in, out, k]
        ConvTranspose conv;
        conv.in = in, conv.out = out, conv.kernel = k, conv.stride = s;
        conv.weight.resize(w.size());
        for (int64_t i = 0; i < in; ++i)
            for (int64_t o = 0; o < out; ++o)
                for (int64_t j = 0; j < k; ++j) conv.weight[size_t((j * out + o) * in + i)] = w[size_t((i * out + o) * k + j)];
        conv.bias = random_vector(static_cast<size_t>(out), rng);
        const auto x = random_vector(static_cast<size_t>(steps * in), rng);
        // Full transposed conv, (steps - 1)·s + k outputs, trimmed on the right to steps·s.
        std::vector<double> full(static_cast<size_t>(((steps - 1) * s + k) * out), 0.0);
        for (int64_t q = 0; q < steps; ++q)
            for (int64_t i = 0; i < in; ++i)
                for (int64_t o = 0; o < out; ++o)
                    for (int64_t j = 0; j < k; ++j)
                        full[size_t((q * s + j) * out + o)] += x[size_t(q * in + i)] * w[size_t((i * out + o) * k + j)];
        std::vector<float> expected(static_cast<size_t>(steps * s * out));
        for (size_t i = 0; i < expected.size(); ++i) expected[i] = float(full[i] + conv.bias[i % size_t(out)]);

        ConvTransposeState whole = new_state(conv);
        EXPECT_LT(testing::max_abs_difference(conv_transpose(conv, whole, x.data(), steps, nullptr), expected), 1e-5);
        ConvTransposeState state = new_state(conv);
        std::vector<float> chunked;
        for (int64_t at : {0, 1, 4}) {
            const int64_t n = at == 4 ? steps - 4 : (at == 0 ? 1 : 3);
            const auto part = conv_transpose(conv, state, x.data() + at * in, n, nullptr);
            chunked.insert(chunked.end(), part.begin(), part.end());
        }
        EXPECT_LT(testing::max_abs_difference(chunked, expected), 1e-5);
    }
}

TEST(FishCodecLayers, SnakeMatchesStdSinAtEverySimdLevel) {
    std::mt19937 rng(3);
    const int64_t channels = 37, steps = 64;
    Snake s;
    s.alpha = random_vector(channels, rng, 3.0f);
    for (float a : s.alpha) s.inv_alpha.push_back(1.0f / (a + 1e-9f));
    auto x = random_vector(static_cast<size_t>(channels * steps), rng, 20.0f);
    x[5] = 3e6f;  // far outside the polynomial's range: takes the exact path
    x[6] = 0.0f;
    std::vector<float> expected(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const double a = s.alpha[i % channels], v = x[i];
        expected[i] = float(v + (1.0 / (a + 1e-9)) * std::pow(std::sin(a * v), 2));
    }
    const cpu::SimdLevel before = cpu::active_simd_level();
    for (cpu::SimdLevel level : {cpu::SimdLevel::Scalar, cpu::SimdLevel::Avx2}) {
        cpu::set_simd_level(level);
        std::vector<float> y = x;
        snake(s, y.data(), steps, nullptr);
        for (size_t i = 0; i < y.size(); ++i)
            ASSERT_NEAR(y[i], expected[i], 2e-5 * std::max(1.0f, std::fabs(expected[i]))) << i;
    }
    cpu::set_simd_level(before);
}

TEST(FishCodecLayers, RopeTableIsBf16RoundedCosSin) {
    std::vector<float> c(32), s(32);
    for (int64_t pos : {0, 1, 17, 4095}) {
        rope_table_bf16(pos, 64, 10000.0f, c.data(), s.data());
        for (int i = 0; i < 32; ++i) {
            const float freq = 1.0f / std::pow(10000.0f, float(2 * i) / 64.0f);
            EXPECT_EQ(c[i], bf16_to_f32(f32_to_bf16(c[i])));
            EXPECT_NEAR(c[i], std::cos(float(pos) * freq), 4e-3);
            EXPECT_NEAR(s[i], std::sin(float(pos) * freq), 4e-3);
        }
    }
}

}  // namespace
}  // namespace duet::fish_codec
