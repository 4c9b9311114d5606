#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/half.h"

namespace duet {
namespace {

// Reference decoders written from the format definitions with ldexp, independent
// of the bit manipulation in half.h.
double reference_f16(uint16_t h) {
    int sign = (h & 0x8000) ? -1 : 1;
    int exponent = (h >> 10) & 0x1F;
    int mantissa = h & 0x3FF;
    if (exponent == 31) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
    if (exponent == 0) return sign * std::ldexp(mantissa, -24);
    return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

double reference_bf16(uint16_t h) {
    int sign = (h & 0x8000) ? -1 : 1;
    int exponent = (h >> 7) & 0xFF;
    int mantissa = h & 0x7F;
    if (exponent == 255) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
    if (exponent == 0) return sign * std::ldexp(mantissa, -133);
    return sign * std::ldexp(128 + mantissa, exponent - 134);
}

double reference_e4m3(uint8_t v) {
    int sign = (v & 0x80) ? -1 : 1;
    int exponent = (v >> 3) & 0xF;
    int mantissa = v & 0x7;
    if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
    if (exponent == 0) return sign * std::ldexp(mantissa, -9);
    return sign * std::ldexp(8 + mantissa, exponent - 10);
}

// Nearest f16 by search over the (monotone) positive encodings, ties to the even
// encoding; values at or past the midpoint above 65504 become infinity.
uint16_t reference_f32_to_f16(float f) {
    double x = std::fabs(static_cast<double>(f));
    uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    if (std::isinf(x)) return sign | 0x7C00;
    auto value = [](uint32_t bits) { return bits == 0x7C00 ? 65536.0 : reference_f16(static_cast<uint16_t>(bits)); };
    uint32_t lo = 0, hi = 0x7C00;  // value(lo) <= x < value(hi), with 65536 as the step past the largest
    if (x >= 65536.0) return sign | 0x7C00;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (value(mid) <= x) lo = mid; else hi = mid;
    }
    double below = x - value(lo);
    double above = value(hi) - x;
    uint32_t pick = below < above ? lo : above < below ? hi : ((lo & 1) ? hi : lo);
    return static_cast<uint16_t>(sign | pick);
}

uint32_t next_random(uint64_t& state) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 32);
}

TEST(HalfBf16, KnownValues) {
    EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
    EXPECT_EQ(f32_to_bf16(-2.0f), 0xC000);
    EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
    EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
    EXPECT_EQ(f32_to_bf16(INFINITY), 0x7F80);
    EXPECT_EQ(f32_to_bf16(-INFINITY), 0xFF80);
    EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
    EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
    EXPECT_EQ(f32_to_bf16(3.14159265f), 0x4049);
}

TEST(HalfBf16, RoundsToNearestEven) {
    // 1 + 2^-8 lies exactly between 0x3F80 and 0x3F81: ties go to the even 0x3F80.
    EXPECT_EQ(f32_to_bf16(std::ldexp(1.0f, 0) + std::ldexp(1.0f, -8)), 0x3F80);
    // 1 + 3 * 2^-8 lies between 0x3F81 and 0x3F82: ties go to the even 0x3F82.
    EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
    // Just above the midpoint rounds up, just below rounds down.
    EXPECT_EQ(f32_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3F81);
    EXPECT_EQ(f32_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 0.0f)), 0x3F80);
    // The largest float rounds up into infinity.
    EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
}

TEST(HalfBf16, NanStaysNan) {
    for (uint32_t bits : {0x7F800001u, 0x7FC00000u, 0xFF800001u, 0x7FFFFFFFu, 0x7F80FFFFu}) {
        uint16_t h = f32_to_bf16(std::bit_cast<float>(bits));
        EXPECT_TRUE(std::isnan(bf16_to_f32(h))) << std::hex << bits;
        EXPECT_EQ(h & 0x8000, (bits >> 16) & 0x8000);
    }
}

TEST(HalfBf16, AllValuesMatchReferenceAndRoundTrip) {
    for (uint32_t i = 0; i < 65536; ++i) {
        uint16_t h = static_cast<uint16_t>(i);
        float f = bf16_to_f32(h);
        double expected = reference_bf16(h);
        if (std::isnan(expected)) {
            EXPECT_TRUE(std::isnan(f)) << i;
            continue;
        }
        ASSERT_EQ(static_cast<double>(f), expected) << i;
        ASSERT_EQ(f32_to_bf16(f), h) << i;
    }
}

TEST(HalfF16, AllValuesMatchReferenceAndRoundTrip) {
    for (uint32_t i = 0; i < 65536; ++i) {
        uint16_t h = static_cast<uint16_t>(i);
        float f = f16_to_f32(h);
        double expected = reference_f16(h);
        if (std::isnan(expected)) {
            EXPECT_TRUE(std::isnan(f)) << i;
            EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << i;
            continue;
        }
        ASSERT_EQ(static_cast<double>(f), expected) << i;
        ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << i;
        ASSERT_EQ(f32_to_f16(f), h) << i;
    }
}

TEST(HalfF16, KnownValues) {
    EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
    EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
    EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
    EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // the tie rounds to the even encoding, infinity
    EXPECT_EQ(f32_to_f16(1e10f), 0x7C00);
    EXPECT_EQ(f32_to_f16(-1e10f), 0xFC00);
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // half of it: tie to even zero
    EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
    EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie to even 2
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
    EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
    EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::denorm_min()), 0x8000);
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(f16_to_f32(0x7C00), INFINITY);
    EXPECT_EQ(f16_to_f32(0xFC00), -INFINITY);
    EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
    EXPECT_TRUE(std::isnan(f16_to_f32(0x7C01)));
    EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::bit_cast<float>(0x7F800001u)))));
}

TEST(HalfF16, RoundingMatchesNearestSearch) {
    // Midpoints between neighbouring encodings and the floats right beside them.
    for (uint32_t bits = 0; bits < 0x7C00; ++bits) {
        double mid = (reference_f16(static_cast<uint16_t>(bits)) +
                      (bits + 1 == 0x7C00 ? 65536.0 : reference_f16(static_cast<uint16_t>(bits + 1)))) /
                     2;
        float m = static_cast<float>(mid);  // exact: the midpoint needs only 12 significant bits
        for (float f : {m, std::nextafter(m, 0.0f), std::nextafter(m, INFINITY), -m}) {
            ASSERT_EQ(f32_to_f16(f), reference_f32_to_f16(f)) << "bits " << bits << " value " << f;
        }
    }
    uint64_t state = 12345;
    for (int i = 0; i < 1000000; ++i) {
        float f = std::bit_cast<float>(next_random(state));
        if (std::isnan(f)) continue;
        ASSERT_EQ(f32_to_f16(f), reference_f32_to_f16(f)) << "value " << f;
    }
}

TEST(HalfFp8, AllValuesMatchReference) {
    for (uint32_t i = 0; i < 256; ++i) {
        uint8_t v = static_cast<uint8_t>(i);
        float f = fp8_e4m3_to_f32(v);
        double expected = reference_e4m3(v);
        if (std::isnan(expected)) {
            EXPECT_TRUE(std::isnan(f)) << i;
            continue;
        }
        EXPECT_EQ(static_cast<double>(f), expected) << i;
        EXPECT_EQ(std::signbit(f), (v & 0x80) != 0) << i;
    }
}

TEST(HalfFp8, KnownValues) {
    EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(0x7E), 448.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(0xFE), -448.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(0x01), 0.001953125f);  // 2^-9, smallest subnormal
    EXPECT_EQ(fp8_e4m3_to_f32(0x08), 0.015625f);     // 2^-6, smallest normal
    EXPECT_EQ(fp8_e4m3_to_f32(0x78), 256.0f);        // exponent 15 is a normal binade
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7F)));
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xFF)));
    int nan_count = 0;
    for (uint32_t i = 0; i < 256; ++i) nan_count += std::isnan(fp8_e4m3_to_f32(static_cast<uint8_t>(i)));
    EXPECT_EQ(nan_count, 2);
}

}  // namespace
}  // namespace duet
