// Which vector instruction set the CPU kernels use, chosen at run time so one
// binary runs on any x86-64 and still uses the widest vectors it has.
#pragma once

#include <optional>
#include <string_view>

namespace duet::cpu {

enum class SimdLevel { Scalar, Avx2, Avx512 };

// The widest level this CPU (and OS) supports: Avx512 needs avx512f, avx512bw,
// avx512vl, avx512dq, fma and f16c; Avx2 needs avx2, fma and f16c.
SimdLevel detected_simd_level();

// The level the kernels use now. On first use it is the detected level, or the
// one named by the environment variable DUET_SIMD (scalar|avx2|avx512), lowered
// to what the CPU supports. Throws duet::Error for an unknown DUET_SIMD value.
SimdLevel active_simd_level();

// Switches the kernels to `level`, lowered to what the CPU supports (for tests
// and benchmarks). Not meant to be called while kernels run on other threads.
void set_simd_level(SimdLevel level);

std::string_view simd_level_name(SimdLevel level);
std::optional<SimdLevel> parse_simd_level(std::string_view name);

}  // namespace duet::cpu
