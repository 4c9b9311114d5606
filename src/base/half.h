// Conversions between float and the narrow floating-point formats that
// checkpoints store: bfloat16, IEEE half (f16) and OCP FP8 E4M3FN.
#pragma once

#include <bit>
#include <cstdint>

namespace duet {

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// Rounds to nearest, ties to even; a NaN stays a (quiet) NaN instead of rounding into infinity.
inline uint16_t f32_to_bf16(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
    uint32_t lsb = (x >> 16) & 1u;
    return static_cast<uint16_t>((x + 0x7FFFu + lsb) >> 16);
}

inline float f16_to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1Fu;
    uint32_t mantissa = h & 0x3FFu;
    if (exponent == 0x1F) {  // infinity or NaN, payload kept
        return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
    }
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
        float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
        return sign ? -magnitude : magnitude;
    }
    return std::bit_cast<float>(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

// Rounds to nearest, ties to even; too large becomes infinity, too small a subnormal or zero.
inline uint16_t f32_to_f16(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    x &= 0x7FFFFFFFu;
    if (x > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((x >> 13) & 0x3FFu));
    if (x >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds up to inf
    if (x >= 0x38800000u) {  // normal in f16 (>= 2^-14)
        uint32_t lsb = (x >> 13) & 1u;
        x = x - ((127u - 15u) << 23) + 0xFFFu + lsb;
        return static_cast<uint16_t>(sign | (x >> 13));
    }
    // Subnormal or zero: adding 0.5 aligns the value to units of 2^-24 and lets
    // the float unit do the rounding; the low mantissa bits are the result.
    float aligned = std::bit_cast<float>(x) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(aligned) - 0x3F000000u));
}

// OCP E4M3FN: bias 7, no infinities, only S.1111.111 is NaN, largest finite 448.
inline float fp8_e4m3_to_f32(uint8_t v) {
    uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
    uint32_t exponent = (v >> 3) & 0xFu;
    uint32_t mantissa = v & 0x7u;
    if (exponent == 0xF && mantissa == 0x7) {
        return std::bit_cast<float>(sign | 0x7FC00000u);
    }
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-9
        float magnitude = static_cast<float>(mantissa) * (1.0f / 512.0f);
        return sign ? -magnitude : magnitude;
    }
    return std::bit_cast<float>(sign | ((exponent + (127 - 7)) << 23) | (mantissa << 20));
}

}  // namespace duet
