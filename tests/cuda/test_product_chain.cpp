// The product chain's hand-overs against a double-precision chain on the host: each way of passing
// one product's result to the next must leave the same output, with every row written after the
// row it reads (outputs start as NaN, so a row read early or left unwritten fails).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "cuda_test_support.h"
#include "kernels/cuda/product_chain.h"

namespace duet::cuda {
namespace {

class ProductChainTest : public testing::DeviceTest {};

// The chain's products in double precision, from the same weights and input.
std::vector<double> reference_chain(const ProductChain& chain, int64_t rows, int64_t cols) {
    std::vector<double> x;
    for (float v : chain.input()) x.push_back(v);
    for (int64_t p = 0; p < chain.products(); ++p) {
        const int64_t out = p % 2 == 0 ? rows : cols, in = p % 2 == 0 ? cols : rows;
        const std::vector<uint16_t> w = chain.weights(p);
        std::vector<double> y(static_cast<size_t>(out), 0.0);
        for (int64_t r = 0; r < out; ++r) {
            for (int64_t c = 0; c < in; ++c) y[size_t(r)] += double(bf16_to_f32(w[size_t(r * in + c)])) * x[size_t(c)];
        }
        x = std::move(y);
    }
    return x;
}

void expect_chain_agrees(int64_t rows, int64_t cols, int64_t products) {
    ProductChain chain(rows, cols, products, 7);
    const std::vector<double> expected = reference_chain(chain, rows, cols);
    double scale = 0.0;
    for (double v : expected) scale = std::max(scale, std::fabs(v));
    ASSERT_GT(scale, 0.0);
    for (ChainHandOver way : kChainHandOvers) {
        if (!ProductChain::available(way)) continue;  // staged and streamed before compute capability 9.0
        for (int pass = 0; pass < 2; ++pass) {  // a second pass reuses the counts and buffers
            chain.clear_outputs();
            chain.run(way, nullptr);
            const std::vector<float> got = chain.output();
            ASSERT_EQ(got.size(), expected.size());
            double worst = 0.0;
            for (size_t i = 0; i < got.size(); ++i) {
                ASSERT_TRUE(std::isfinite(got[i])) << hand_over_name(way) << " row " << i << " pass " << pass;
                worst = std::max(worst, std::fabs(got[i] - expected[i]));
            }
            EXPECT_LT(worst / scale, 1e-4) << hand_over_name(way) << " pass " << pass;
        }
    }
}

TEST_F(ProductChainTest, EveryHandOverMatchesTheHostChain) {
    expect_chain_agrees(200, 96, 5);   // rows in a part-filled last block, rows shorter than a warp
    expect_chain_agrees(1024, 512, 6);  // longer rows, both halves of the chain wider than a block
}

TEST_F(ProductChainTest, OneKernelWarpsTakeSeveralRows) {
    // More rows than the resident grid has warps (an H200: 132 SMs × 8 blocks × 4 warps = 4224).
    expect_chain_agrees(12288, 64, 3);
}

TEST_F(ProductChainTest, StagedBlocksShareLongRows) {
    if (!ProductChain::available(ChainHandOver::staged)) GTEST_SKIP() << "the staged way needs compute capability 9.0";
    // Rows of 4096 and 8192 columns: stages of 4 and 2 rows, each row's dot split over 2 and 4 warps.
    expect_chain_agrees(520, 4096, 2);
    expect_chain_agrees(264, 8192, 2);
}

TEST_F(ProductChainTest, StreamedRingWrapsAcrossProducts) {
    if (!ProductChain::available(ChainHandOver::streamed)) GTEST_SKIP() << "the streamed way needs compute capability 9.0";
    // Every block's share is several tiles of every product, so the ring (at most 16 stages) is
    // refilled many times over, with tiles of products whose inputs are not written yet.
    expect_chain_agrees(2048, 2048, 8);
    expect_chain_agrees(4096, 1024, 7);
}

TEST_F(ProductChainTest, RejectsShapesItCannotStream) {
    EXPECT_THROW(ProductChain(100, 64, 2, 1), Error);
    EXPECT_THROW(ProductChain(64, 64, 0, 1), Error);
}

}  // namespace
}  // namespace duet::cuda
