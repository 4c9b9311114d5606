// How a long prompt's expert slots are grouped and tiled for the grouped products: host code only,
// so these run without a GPU too.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/tensor_core_products.h"

namespace duet {
namespace {

// Random routings of n tokens × k slots over `experts`, some experts left without a slot.
std::vector<int32_t> random_choices(std::mt19937& rng, int64_t n, int64_t k, int64_t experts) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(experts / 2));
    std::vector<int32_t> chosen(static_cast<size_t>(n * k));
    for (int32_t& e : chosen) e = 2 * pick(rng) % static_cast<int32_t>(experts);  // even experts only
    return chosen;
}

TEST(ExpertGroups, EverySlotLandsOnARowOfItsExpert) {
    std::mt19937 rng(7);
    const int64_t n = 300, k = 8, experts = 64;
    const std::vector<int32_t> chosen = random_choices(rng, n, k, experts);
    const ExpertGroups g = group_by_expert(chosen, experts, k);
    ASSERT_EQ(g.offset.size(), static_cast<size_t>(experts + 1));
    EXPECT_EQ(g.offset.back(), n * k);
    std::vector<int> seen(static_cast<size_t>(n * k), 0);
    for (int64_t s = 0; s < n * k; ++s) {
        const int32_t row = g.row_of_slot[s];
        const int32_t e = chosen[s];
        EXPECT_GE(row, g.offset[e]);
        EXPECT_LT(row, g.offset[e + 1]);
        EXPECT_EQ(g.token_of_row[row], s / k);
        ++seen[row];
    }
    for (int count : seen) EXPECT_EQ(count, 1);
}

TEST(ExpertGroups, TilesCoverEachGroupInOrderWithoutOverlap) {
    std::mt19937 rng(11);
    for (int64_t n : {1, 33, 500}) {
        const int64_t k = 6, experts = 40;
        const ExpertGroups g = group_by_expert(random_choices(rng, n, k, experts), experts, k);
        const std::vector<cuda::ExpertRowTile> tiles = expert_row_tiles(g);
        int64_t next_row = 0;
        int32_t last_expert = -1;
        for (const cuda::ExpertRowTile& t : tiles) {
            EXPECT_GE(t.expert, last_expert) << "an expert's tiles are together, in expert order";
            last_expert = t.expert;
            EXPECT_GT(t.count, 0);
            EXPECT_LE(t.count, cuda::kExpertTileRows);
            EXPECT_EQ(t.first_row, next_row) << "rows covered once, in order";
            EXPECT_GE(t.first_row, g.offset[t.expert]);
            EXPECT_LE(t.first_row + t.count, g.offset[t.expert + 1]);
            next_row = t.first_row + t.count;
        }
        EXPECT_EQ(next_row, n * k);
    }
}

TEST(ExpertGroups, ARoutingOutsideTheExpertsIsRefused) {
    EXPECT_THROW(group_by_expert({0, 5, 9}, 8, 1), std::exception);
    EXPECT_THROW(group_by_expert({-1}, 8, 1), std::exception);
}

}  // namespace
}  // namespace duet
