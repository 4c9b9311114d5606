// How a decode token's mixer in-projection is cut so that the mixer's step may start on each of its
// units (a Mamba-2 group, a Gated DeltaNet value head) as soon as that unit's rows are stored,
// instead of waiting for the whole launch (cuda::RowsReady, cuda::UnitsReady). The products' rows
// are taken as ranges in an order that finishes the units one after another: the small per-head rows
// first, then the shared ones, then the wide per-unit ones, whose last range decides when each unit is
// done. Host logic only; the backend turns the ranges into one grouped launch.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace duet::cuda {

struct MixerRowRange {
    int product = 0;         // which of the products
    int64_t first_row = 0;   // the range's rows of that product's matrix and output
    int64_t rows = 0;
    int64_t rows_per_unit = 1;  // row r of the range feeds units (r / rows_per_unit) · fanout + j, j < fanout
    int64_t fanout = 1;
};

struct MixerRowsSplit {
    std::vector<MixerRowRange> ranges;  // in launch order
    int64_t units = 0;
    // The rows a unit's counter reaches once all of them are stored: each range gives every unit it
    // feeds rows_per_unit rows.
    int64_t unit_rows() const {
        int64_t total = 0;
        for (const MixerRowRange& r : ranges) total += r.rows_per_unit;
        return total;
    }
};

// The split for Mamba-2's one in-projection [z | x | B | C | dt] read by `m` as laid out by the
// models (z at the output's start, x after the inner width, dt after the convolved channels); none
// where the products or `m` are laid out otherwise, or the one-launch step (cuda::mamba_step) does
// not take `m`.
std::optional<MixerRowsSplit> mamba_rows_split(std::span<const ProductOut> products, const MambaMiddleArgs& m);

// The split for Gated DeltaNet's products {qkv, z, b, a} read by `m`; none where they are laid out
// otherwise, or the one-launch step (cuda::delta_step) does not take `m`.
std::optional<MixerRowsSplit> delta_rows_split(std::span<const ProductOut> products, const DeltaMiddleArgs& m);

}  // namespace duet::cuda
