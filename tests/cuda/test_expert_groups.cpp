// How a long prompt's expert slots are grouped and tiled on the device for the grouped products
// (cuda::group_slots_by_expert), against a plain sequential grouping on the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"

namespace duet {
namespace {

// Random routings of n tokens × k slots over `experts`; with `sparse` only the even experts are
// chosen, so some have no slot.
std::vector<int32_t> random_choices(std::mt19937& rng, int64_t n, int64_t k, int64_t experts, bool sparse) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(experts - 1));
    std::vector<int32_t> chosen(static_cast<size_t>(n * k));
    for (int32_t& e : chosen) e = sparse ? pick(rng) / 2 * 2 : pick(rng);
    return chosen;
}

// The grouping done one slot after another: the experts in order, each expert's rows in the order of
// its slots, cut into tiles of at most kExpertTileRows.
struct Grouping {
    std::vector<int32_t> row_of_slot, token_of_row;
    std::vector<cuda::ExpertRowTile> tiles;
};
Grouping group_in_order(const std::vector<int32_t>& chosen, int64_t experts, int64_t k) {
    Grouping g;
    g.row_of_slot.resize(chosen.size());
    g.token_of_row.resize(chosen.size());
    int32_t row = 0;
    for (int32_t e = 0; e < experts; ++e) {
        const int32_t first = row;
        for (size_t s = 0; s < chosen.size(); ++s) {
            if (chosen[s] != e) continue;
            g.row_of_slot[s] = row;
            g.token_of_row[static_cast<size_t>(row)] = static_cast<int32_t>(static_cast<int64_t>(s) / k);
            ++row;
        }
        for (int32_t r = first; r < row; r += cuda::kExpertTileRows) {
            g.tiles.push_back({e, r, std::min<int32_t>(cuda::kExpertTileRows, row - r)});
        }
    }
    return g;
}

Grouping group_on_device(const std::vector<int32_t>& chosen, int64_t experts, int64_t k) {
    const auto slots = static_cast<int64_t>(chosen.size());
    const int64_t max_tiles = cuda::max_expert_row_tiles(slots, experts);
    cuda::DeviceBuffer device_chosen = cuda::DeviceBuffer::from_vector(chosen);
    cuda::DeviceBuffer maps(static_cast<size_t>(2 * slots + 1) * sizeof(int32_t));
    cuda::DeviceBuffer tiles(static_cast<size_t>(std::max<int64_t>(max_tiles, 1)) * sizeof(cuda::ExpertRowTile));
    int32_t* m = maps.as<int32_t>();
    const cuda::ExpertGroupsOnDevice out{m, m + slots, tiles.as<cuda::ExpertRowTile>(), m + 2 * slots};
    cuda::group_slots_by_expert(device_chosen.as<int32_t>(), slots, k, experts, out, nullptr);
    const std::vector<int32_t> all = maps.download<int32_t>(static_cast<size_t>(2 * slots + 1));
    Grouping g;
    g.row_of_slot.assign(all.begin(), all.begin() + slots);
    g.token_of_row.assign(all.begin() + slots, all.begin() + 2 * slots);
    const int32_t tile_count = all.back();
    EXPECT_LE(tile_count, max_tiles) << "the tiles fit the bound the grouped launch is sized by";
    g.tiles = tiles.download<cuda::ExpertRowTile>(static_cast<size_t>(std::min<int64_t>(tile_count, max_tiles)));
    return g;
}

class ExpertGroups : public cuda::testing::DeviceTest {};

TEST_F(ExpertGroups, DeviceGroupingMatchesTheSequentialOne) {
    std::mt19937 rng(7);
    struct Shape {
        int64_t n, k, experts;
        bool sparse;
    };
    // One token; a slot count below a warp; several rounds of the placing warp with experts of many
    // tiles; the models' routers (Qwen3.5's 256 × 8 over a 512-token chunk, Nemotron-H's 128 × 6);
    // the most experts the kernel takes.
    for (const Shape& shape : {Shape{1, 8, 256, false}, Shape{3, 6, 40, true}, Shape{500, 6, 40, true},
                               Shape{512, 8, 256, false}, Shape{300, 6, 128, true}, Shape{64, 4, 1024, false}}) {
        SCOPED_TRACE(testing::Message() << shape.n << " tokens × " << shape.k << " over " << shape.experts);
        const std::vector<int32_t> chosen = random_choices(rng, shape.n, shape.k, shape.experts, shape.sparse);
        const Grouping want = group_in_order(chosen, shape.experts, shape.k);
        const Grouping got = group_on_device(chosen, shape.experts, shape.k);
        EXPECT_EQ(got.row_of_slot, want.row_of_slot);
        EXPECT_EQ(got.token_of_row, want.token_of_row);
        ASSERT_EQ(got.tiles.size(), want.tiles.size());
        for (size_t t = 0; t < want.tiles.size(); ++t) {
            EXPECT_EQ(got.tiles[t].expert, want.tiles[t].expert) << "tile " << t;
            EXPECT_EQ(got.tiles[t].first_row, want.tiles[t].first_row) << "tile " << t;
            EXPECT_EQ(got.tiles[t].count, want.tiles[t].count) << "tile " << t;
        }
    }
}

TEST(ExpertGrouping, MoreExpertsThanTheKernelTakesAreRefused) {
    EXPECT_THROW(cuda::group_slots_by_expert(nullptr, 8, 1, 1025, cuda::ExpertGroupsOnDevice{}, nullptr),
                 std::exception);
}

TEST(ExpertGrouping, TheTileBoundCoversEveryRouting) {
    // Every expert part-filled and the rest in full tiles is the worst case.
    EXPECT_EQ(cuda::max_expert_row_tiles(0, 8), 0);
    EXPECT_EQ(cuda::max_expert_row_tiles(5, 8), 5);
    EXPECT_EQ(cuda::max_expert_row_tiles(4096, 256), 4096 / cuda::kExpertTileRows + 256);
    std::mt19937 rng(3);
    for (int64_t n : {1, 40, 700}) {
        const std::vector<int32_t> chosen = random_choices(rng, n, 6, 40, true);
        const Grouping g = group_in_order(chosen, 40, 6);
        EXPECT_LE(static_cast<int64_t>(g.tiles.size()), cuda::max_expert_row_tiles(n * 6, 40));
    }
}

}  // namespace
}  // namespace duet
