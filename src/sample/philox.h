// Counter-based random numbers: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3", SC'11), the generator cuRAND also offers. A draw is a pure function of (seed, step,
// slot), so the CPU and a GPU kernel produce the same numbers in any order, and a run is reproduced
// exactly by its seed. The generator is compiled for both: the GPU kernels include this header.
#pragma once

#include <array>
#include <cstdint>

#include "base/host_device.h"

namespace duet {

// The ten rounds on plain arrays, so host and device code share one definition: `counter` in,
// the random block out in its place.
DUET_HOST_DEVICE inline void philox4x32_rounds(uint32_t counter[4], uint32_t key0, uint32_t key1) {
    constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
    constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        const uint64_t p0 = static_cast<uint64_t>(kMul0) * counter[0];
        const uint64_t p1 = static_cast<uint64_t>(kMul1) * counter[2];
        const uint32_t next0 = static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key0;
        const uint32_t next2 = static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key1;
        counter[0] = next0;
        counter[1] = static_cast<uint32_t>(p1);
        counter[2] = next2;
        counter[3] = static_cast<uint32_t>(p0);
        key0 += kWeyl0;
        key1 += kWeyl1;
    }
}

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
    philox4x32_rounds(counter.data(), key[0], key[1]);
    return counter;
}

// A uniform number in [0, 1) with 24 random bits, keyed by the seed and counted by (step, slot).
DUET_HOST_DEVICE inline float uniform_draw(uint64_t seed, uint64_t step, uint32_t slot) {
    uint32_t bits[4] = {static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), slot, 0u};
    philox4x32_rounds(bits, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    return static_cast<float>(bits[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace duet
