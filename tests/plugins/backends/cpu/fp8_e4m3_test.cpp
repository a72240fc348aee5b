// The SDK's scalar FP8 E4M3 ("E4M3FN") conversions in quant.h, which the
// KV cache stores and the attention kernels decode with: every code
// against the format's formula, every code round trip, and the encoder
// against a nearest-value search over a sweep of floats and the points
// either side of every rounding boundary; and the offset-key encoder
// (dwell_fp8_encode_key) against the test's own rendering of its contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "dwell/quant.h"
#include "fp8_key_reference.hpp"

namespace {

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// The OCP definition: exponent 0 holds m * 2^-9, 0x7f/0xff are NaN, the
// rest (1 + m / 8) * 2^(e - 7).
double formula(uint8_t c) {
    const int e = (c >> 3) & 15, m = c & 7;
    double v;
    if (e == 15 && m == 7) {
        v = NAN;
    } else if (e == 0) {
        v = std::ldexp(m, -9);
    } else {
        v = std::ldexp(8 + m, e - 10);
    }
    return (c & 0x80) ? -v : v;
}

// The 127 finite magnitudes in code order, which is increasing order.
std::vector<double> magnitudes() {
    std::vector<double> v;
    for (int c = 0; c <= 0x7e; ++c) v.push_back(formula(static_cast<uint8_t>(c)));
    return v;
}

// Nearest finite code, ties to the even code (codes of adjacent values
// differ by one, so "even mantissa" is "even code"), everything from 448 up
// saturated, NaN to the NaN code; the sign copied.
uint8_t reference_encode(float f, const std::vector<double>& mags) {
    const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
    if (std::isnan(f)) return sign | 0x7f;
    const double a = std::fabs(static_cast<double>(f));
    if (a >= mags.back()) return sign | 0x7e;
    const auto hi =
        static_cast<size_t>(std::upper_bound(mags.begin(), mags.end(), a) - mags.begin());
    const size_t lo = hi - 1;
    const double below = a - mags[lo], above = mags[hi] - a;
    const size_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
    return static_cast<uint8_t>(sign | pick);
}

TEST(Fp8E4M3, EveryCodeDecodesToTheFormula) {
    for (int c = 0; c < 256; ++c) {
        const auto code = static_cast<uint8_t>(c);
        const float got = dwell_fp8_e4m3_to_fp32(code);
        const double want = formula(code);
        if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << "code " << c;
        } else {
            // Exact, zero signs included.
            EXPECT_EQ(bits_of(got), bits_of(static_cast<float>(want))) << "code " << c;
        }
    }
    EXPECT_EQ(dwell_fp8_e4m3_to_fp32(0x7e), 448.0f);
    EXPECT_EQ(dwell_fp8_e4m3_to_fp32(0xfe), -448.0f);
    EXPECT_EQ(dwell_fp8_e4m3_to_fp32(0x01), 0x1p-9f);
    EXPECT_EQ(dwell_fp8_e4m3_to_fp32(0x08), 0x1p-6f);
    EXPECT_EQ(dwell_fp8_e4m3_to_fp32(0x38), 1.0f);
    EXPECT_EQ(dwell_fp8_e4m3_to_fp32(0x78), 256.0f);  // exponent 15 is still finite
}

TEST(Fp8E4M3, AllCodesRoundTrip) {
    for (int c = 0; c < 256; ++c) {
        const auto code = static_cast<uint8_t>(c);
        EXPECT_EQ(dwell_fp32_to_fp8_e4m3(dwell_fp8_e4m3_to_fp32(code)), code) << "code " << c;
    }
}

TEST(Fp8E4M3, EncodesTiesToEven) {
    const auto mags = magnitudes();
    for (size_t i = 0; i + 1 < mags.size(); ++i) {
        // The midpoint of adjacent values is exact in float.
        const auto mid = static_cast<float>((mags[i] + mags[i + 1]) / 2);
        const auto even = static_cast<uint8_t>(i % 2 == 0 ? i : i + 1);
        EXPECT_EQ(dwell_fp32_to_fp8_e4m3(mid), even) << "between codes " << i << " and " << i + 1;
        EXPECT_EQ(dwell_fp32_to_fp8_e4m3(-mid), even | 0x80) << "negated, code " << i;
        EXPECT_EQ(dwell_fp32_to_fp8_e4m3(std::nextafter(mid, 0.0f)), i);
        EXPECT_EQ(dwell_fp32_to_fp8_e4m3(std::nextafter(mid, 1000.0f)), i + 1);
    }
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(1.0625f), 0x38);  // 1 | 1.125: to 1
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(1.1875f), 0x3a);  // 1.125 | 1.25: to 1.25
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(0x1p-10f), 0x00);
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(0x3p-10f), 0x02);
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(0xfp-10f), 0x08);  // 7.5 * 2^-9: up to the smallest normal
}

TEST(Fp8E4M3, SaturatesFiniteOverflowAndInfinities) {
    for (float f : {448.0f, 449.0f, 463.99f, 464.0f, 480.0f, 1e6f, FLT_MAX, INFINITY}) {
        EXPECT_EQ(dwell_fp32_to_fp8_e4m3(f), 0x7e) << f;
        EXPECT_EQ(dwell_fp32_to_fp8_e4m3(-f), 0xfe) << -f;
    }
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(447.0f), 0x7e);
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(431.0f), 0x7d);  // 416 | 448 midpoint is 432
}

TEST(Fp8E4M3, Subnormals) {
    for (int m = 0; m < 8; ++m) {
        EXPECT_EQ(dwell_fp32_to_fp8_e4m3(std::ldexp(static_cast<float>(m), -9)), m);
        EXPECT_EQ(dwell_fp32_to_fp8_e4m3(-std::ldexp(static_cast<float>(m), -9)), 0x80 | m);
    }
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(0x1p-11f), 0x00);
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(0x1.000002p-10f), 0x01);  // just above half the step
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(FLT_TRUE_MIN), 0x00);
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(-FLT_TRUE_MIN), 0x80);
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(0.0f), 0x00);
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(-0.0f), 0x80);
}

TEST(Fp8E4M3, NanStaysNan) {
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(NAN), 0x7f);
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(-NAN), 0xff);
    EXPECT_EQ(dwell_fp32_to_fp8_e4m3(float_of(0x7f800001u)), 0x7f);  // signalling payload
    EXPECT_TRUE(std::isnan(dwell_fp8_e4m3_to_fp32(0x7f)));
    EXPECT_TRUE(std::isnan(dwell_fp8_e4m3_to_fp32(0xff)));
}

// Every 97th float from 0 to inf (about 22 million, all binades and the
// float subnormals), both signs, against the nearest-value search.
TEST(Fp8E4M3, EncoderMatchesNearestValueSearch) {
    const auto mags = magnitudes();
    int64_t mismatches = 0;
    for (uint32_t u = 0; u <= 0x7f800000u && mismatches < 10; u += 97) {
        for (uint32_t sign : {0u, 0x80000000u}) {
            const float f = float_of(u | sign);
            const uint8_t got = dwell_fp32_to_fp8_e4m3(f);
            const uint8_t want = reference_encode(f, mags);
            if (got != want) {
                ++mismatches;
                ADD_FAILURE() << "f=" << f << " (bits " << std::hex << (u | sign) << ") got "
                              << int(got) << " want " << int(want);
            }
        }
    }
}

// Offset keys: random heads of 8 over the whole range (subnormals, values
// near and past 448, exact codes, zeros of both signs), random offsets and
// queries; the codes equal the reference's, which searches all 256 codes
// for the two neighbours and keeps the running error in double. Without a
// query every code is the nearest; a NaN value gives a NaN code and leaves
// the other choices alone.
TEST(Fp8E4M3, OffsetKeyEncoderMatchesTheContract) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    std::uniform_int_distribution<int> kind(0, 5), code(0, 255), exponent(-12, 10);
    const auto value = [&] {
        switch (kind(rng)) {
            case 0:
                return std::ldexp(unit(rng), exponent(rng));
            case 1:
                return unit(rng) * 500.0f;
            case 2: {
                const auto c = static_cast<uint8_t>(code(rng) & 0xfe);  // no NaN
                return dwell_fp8_e4m3_to_fp32(c);
            }
            case 3:
                return std::copysign(0.0f, unit(rng));
            default:
                return unit(rng) * 30.0f;
        }
    };
    constexpr int kRows = 5000;
    int far_choices = 0;
    for (int row = 0; row < kRows; ++row) {
        std::vector<float> key(8), offset(8), q(8);
        for (int i = 0; i < 8; ++i) {
            key[i] = value();
            offset[i] = row % 3 == 0 ? 0.0f : unit(rng) * 20.0f;
            q[i] = unit(rng) * 4.0f;
        }
        uint8_t got[8], nearest[8];
        dwell_fp8_encode_key(key.data(), offset.data(), q.data(), 8, got);
        dwell_fp8_encode_key(key.data(), offset.data(), nullptr, 8, nearest);
        const auto want = dwell::test::ref_fp8_key_codes(key.data(), offset, q, 8);
        const auto want_nearest = dwell::test::ref_fp8_key_codes(key.data(), offset, {}, 8);
        for (int i = 0; i < 8; ++i) {
            ASSERT_EQ(got[i], want[static_cast<size_t>(i)])
                << "row " << row << " value " << i << ": key " << key[i] << " offset " << offset[i];
            ASSERT_EQ(nearest[i], want_nearest[static_cast<size_t>(i)]) << "row " << row;
            far_choices += got[i] != nearest[i];
        }
    }
    // The query moves a good share of the values to the far neighbour.
    EXPECT_GT(far_choices, kRows * 8 / 10);

    float key[4] = {1.0f, NAN, 2.5f, -3.0f};
    const float q[4] = {1.0f, 1.0f, -2.0f, 0.5f};
    uint8_t got[4];
    dwell_fp8_encode_key(key, nullptr, q, 4, got);
    EXPECT_EQ(got[1] & 0x7f, 0x7f);
    key[1] = 0.0f;
    const auto want = dwell::test::ref_fp8_key_codes(key, std::vector<float>(4, 0.0f),
                                                     std::vector<float>(q, q + 4), 4);
    EXPECT_EQ(got[0], want[0]);
    EXPECT_EQ(got[2], want[2]);
    EXPECT_EQ(got[3], want[3]);
}

}  // namespace
