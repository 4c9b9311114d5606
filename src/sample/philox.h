// Counter-based random numbers: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3", SC'11), the generator cuRAND also offers. A draw is a pure function of (seed, step,
// slot), so the CPU and a GPU kernel produce the same numbers in any order, and a run is reproduced
// exactly by its seed.
#pragma once

#include <array>
#include <cstdint>

namespace duet {

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
    constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
    constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        const uint64_t p0 = static_cast<uint64_t>(kMul0) * counter[0];
        const uint64_t p1 = static_cast<uint64_t>(kMul1) * counter[2];
        counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<uint32_t>(p1),
                   static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<uint32_t>(p0)};
        key[0] += kWeyl0;
        key[1] += kWeyl1;
    }
    return counter;
}

// A uniform number in [0, 1) with 24 random bits, keyed by the seed and counted by (step, slot).
inline float uniform_draw(uint64_t seed, uint64_t step, uint32_t slot) {
    const auto bits = philox4x32({static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), slot, 0u},
                                 {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
    return static_cast<float>(bits[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace duet
