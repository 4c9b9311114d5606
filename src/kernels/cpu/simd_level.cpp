#include "kernels/cpu/simd_level.h"

#include <atomic>
#include <cstdlib>

#include "base/error.h"

namespace duet::cpu {

namespace {

constexpr int kUnset = -1;
std::atomic<int> g_active_level{kUnset};

SimdLevel clamp_to_cpu(SimdLevel level) {
    const SimdLevel detected = detected_simd_level();
    return static_cast<int>(level) > static_cast<int>(detected) ? detected : level;
}

SimdLevel initial_level() {
    const char* requested = std::getenv("DUET_SIMD");
    if (requested == nullptr || *requested == '\0') return detected_simd_level();
    const std::optional<SimdLevel> level = parse_simd_level(requested);
    require(level.has_value(), "DUET_SIMD: unknown level '", requested,
            "', expected scalar, avx2 or avx512");
    return clamp_to_cpu(*level);
}

}  // namespace

SimdLevel detected_simd_level() {
#if defined(__x86_64__) || defined(__i386__)
    // __builtin_cpu_supports also checks that the OS saves the wide registers.
    static const SimdLevel detected = [] {
        __builtin_cpu_init();
        // avx512dq too, since matmul_avx512.cpp is compiled with it; every CPU
        // with avx512bw and avx512vl has it.
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
            return SimdLevel::Avx512;
        }
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            __builtin_cpu_supports("f16c")) {
            return SimdLevel::Avx2;
        }
        return SimdLevel::Scalar;
    }();
    return detected;
#else
    return SimdLevel::Scalar;
#endif
}

SimdLevel active_simd_level() {
    int level = g_active_level.load(std::memory_order_acquire);
    if (level == kUnset) {
        int expected = kUnset;
        const int initial = static_cast<int>(initial_level());
        g_active_level.compare_exchange_strong(expected, initial, std::memory_order_acq_rel);
        level = g_active_level.load(std::memory_order_acquire);
    }
    return static_cast<SimdLevel>(level);
}

void set_simd_level(SimdLevel level) {
    g_active_level.store(static_cast<int>(clamp_to_cpu(level)), std::memory_order_release);
}

std::string_view simd_level_name(SimdLevel level) {
    switch (level) {
        case SimdLevel::Scalar: return "scalar";
        case SimdLevel::Avx2: return "avx2";
        case SimdLevel::Avx512: return "avx512";
    }
    return "?";
}

std::optional<SimdLevel> parse_simd_level(std::string_view name) {
    for (SimdLevel level : {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512}) {
        if (simd_level_name(level) == name) return level;
    }
    return std::nullopt;
}

}  // namespace duet::cpu
