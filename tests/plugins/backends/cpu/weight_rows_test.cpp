// Dequantization, dot products and quantization of single rows, against
// hand-computed blocks and a double-precision decoder.
#include "simd/weight_rows.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "cpu_test_graph.hpp"
#include "quant/row_quantize.hpp"

namespace dwell::cpu {
namespace {

using test::random_floats;
using test::random_weight_rows;
using test::ref_decode_row;

TEST(WeightRows, Q4_0BlockWithKnownScaleAndNibbles) {
    // d = 0.5; low nibble of byte j is j, high nibble is 15 - j.
    uint8_t block[18] = {0x00, 0x38};  // fp16 0.5, little endian
    for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    float out[32];
    dequantize_row(DWELL_Q4_0, block, out, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(out[j], 0.5f * static_cast<float>(j - 8)) << j;
        EXPECT_EQ(out[16 + j], 0.5f * static_cast<float>(7 - j)) << j;
    }
}

TEST(WeightRows, Q8_0BlockWithKnownScale) {
    uint8_t block[34] = {0x00, 0x34};  // fp16 0.25
    for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
    float out[32];
    dequantize_row(DWELL_Q8_0, block, out, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.25f * static_cast<float>(j - 16)) << j;
}

TEST(WeightRows, HalfAndBfloatKnownValues) {
    const uint16_t halves[] = {0x3c00, 0xc000, 0x3555, 0x0001, 0x7bff};
    float out[5];
    dequantize_row(DWELL_F16, halves, out, 5);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], -2.0f);
    EXPECT_EQ(out[2], 0.333251953125f);
    EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
    EXPECT_EQ(out[4], 65504.0f);
    const uint16_t bf[] = {0x3f80, 0x4049, 0xbf00};
    dequantize_row(DWELL_BF16, bf, out, 3);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], 3.140625f);
    EXPECT_EQ(out[2], -0.5f);
}

TEST(WeightRows, DequantizeMatchesReferenceDecoderForEveryDtype) {
    for (dwell_dtype t : test::kWeightDtypes) {
        const int64_t n = dwell_dtype_block_elems(t) == DWELL_QK_K ? 512 : 160;
        const auto row = random_weight_rows(t, n, 1, 7);
        const auto ref = ref_decode_row(t, row.data(), n);
        std::vector<float> out(static_cast<size_t>(n));
        dequantize_row(t, row.data(), out.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            EXPECT_EQ(out[static_cast<size_t>(i)], static_cast<float>(ref[static_cast<size_t>(i)]))
                << dwell_dtype_name(t) << " element " << i;
        }
    }
}

TEST(WeightRows, DotMatchesDoubleReferenceForEveryDtype) {
    for (dwell_dtype t : test::kWeightDtypes) {
        for (int64_t n : {32, 96, 160, 256, 768}) {
            if (n % dwell_dtype_block_elems(t) != 0) continue;
            const auto row = random_weight_rows(t, n, 1, static_cast<uint32_t>(n));
            const auto x = random_floats(static_cast<size_t>(n), 99);
            const auto w = ref_decode_row(t, row.data(), n);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n; ++i) {
                ref += w[static_cast<size_t>(i)] * x[static_cast<size_t>(i)];
                mag += std::fabs(w[static_cast<size_t>(i)] * x[static_cast<size_t>(i)]);
            }
            EXPECT_NEAR(dot_row(t, row.data(), x.data(), n), ref,
                        1e-6 * static_cast<double>(n) * mag + 1e-7)
                << dwell_dtype_name(t) << " n=" << n;
        }
    }
}

TEST(RowQuantize, Q8_0HandComputedBlock) {
    // amax 127 makes d exactly 1, so q is round(x) with halves away from 0.
    float x[32] = {-127.0f, 0.5f, 1.5f, -0.5f, 2.49f, 126.6f, -3.5f};
    dwell_block_q8_0 b;
    quantize_row_q8_0(x, &b, 32);
    EXPECT_EQ(b.d, 0x3c00);
    const int expected[7] = {-127, 1, 2, -1, 2, 127, -4};
    for (int j = 0; j < 7; ++j) EXPECT_EQ(b.qs[j], expected[j]) << j;
    for (int j = 7; j < 32; ++j) EXPECT_EQ(b.qs[j], 0) << j;
}

TEST(RowQuantize, Q4_0HandComputedBlocks) {
    // Largest magnitude -8: d = -8 / -8 = 1, q = min(15, trunc(x + 8.5)).
    float x[32] = {-8.0f, 0.0f, 7.0f, 7.4f, -0.6f, 0.5f, -7.5f};
    dwell_block_q4_0 b;
    quantize_row_q4_0(x, &b, 32);
    EXPECT_EQ(b.d, 0x3c00);
    const int expected[7] = {0, 8, 15, 15, 7, 9, 1};
    for (int j = 0; j < 7; ++j) EXPECT_EQ(b.qs[j] & 15, expected[j]) << j;
    for (int j = 16; j < 32; ++j) EXPECT_EQ(b.qs[j - 16] >> 4, 8) << j;  // zeros

    // Largest magnitude +8: d = -1, so x = 8 is nibble 0 and x = -7 nibble 15.
    float y[32] = {8.0f, -7.0f, 1.0f};
    quantize_row_q4_0(y, &b, 32);
    EXPECT_EQ(b.d, 0xbc00);
    EXPECT_EQ(b.qs[0] & 15, 0);
    EXPECT_EQ(b.qs[1] & 15, 15);
    EXPECT_EQ(b.qs[2] & 15, 7);
    float back[32];
    dequantize_row(DWELL_Q4_0, &b, back, 32);
    EXPECT_EQ(back[0], 8.0f);
    EXPECT_EQ(back[1], -7.0f);
    EXPECT_EQ(back[2], 1.0f);
}

TEST(RowQuantize, AllZeroBlocksStayZero) {
    float x[32] = {};
    dwell_block_q8_0 b8;
    dwell_block_q4_0 b4;
    quantize_row_q8_0(x, &b8, 32);
    quantize_row_q4_0(x, &b4, 32);
    float back[32];
    dequantize_row(DWELL_Q8_0, &b8, back, 32);
    for (float v : back) EXPECT_EQ(v, 0.0f);
    dequantize_row(DWELL_Q4_0, &b4, back, 32);
    for (float v : back) EXPECT_EQ(v, 0.0f);
}

TEST(RowQuantize, RoundTripErrorWithinHalfAStep) {
    const int64_t n = 32 * 8;
    const auto x = random_floats(static_cast<size_t>(n), 1234, -3.0f, 3.0f);
    std::vector<uint8_t> q8(dwell_row_bytes(DWELL_Q8_0, n)), q4(dwell_row_bytes(DWELL_Q4_0, n));
    quantize_row_q8_0(x.data(), q8.data(), n);
    quantize_row_q4_0(x.data(), q4.data(), n);
    std::vector<float> back8(static_cast<size_t>(n)), back4(static_cast<size_t>(n));
    dequantize_row(DWELL_Q8_0, q8.data(), back8.data(), n);
    dequantize_row(DWELL_Q4_0, q4.data(), back4.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
        double amax = 0;
        for (int j = 0; j < 32; ++j)
            amax = std::max(amax, std::fabs(static_cast<double>(x[b * 32 + j])));
        // Half a step, plus the fp16 rounding of the scale times the largest q.
        const double step8 = amax / 127.0;
        const double step4 = amax / 8.0;
        for (int j = 0; j < 32; ++j) {
            const size_t i = static_cast<size_t>(b * 32 + j);
            EXPECT_LE(std::fabs(back8[i] - x[i]), 0.5 * step8 + 127 * step8 / 2048 + 1e-7) << i;
            // The top of Q4_0's range (q = 15 is 7 steps) clips values just
            // below the opposite extreme by up to one step.
            EXPECT_LE(std::fabs(back4[i] - x[i]), 1.0 * step4 + 8 * step4 / 2048 + 1e-7) << i;
        }
    }
}

TEST(RowQuantize, Bf16RoundsToNearestEven) {
    EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even (down)
    EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even (up)
    EXPECT_EQ(fp32_to_bf16(1.0f + 5 * std::ldexp(1.0f, -9)), 0x3f81);  // above half -> up
    EXPECT_EQ(fp32_to_bf16(-2.0f), 0xc000);
    const uint16_t nan = fp32_to_bf16(NAN);
    EXPECT_TRUE(std::isnan(dwell_bf16_to_fp32(nan)));
}

TEST(RowQuantize, StoreRowF16AndF32) {
    const float x[3] = {1.0f, -2.0f, 0.1f};
    uint16_t h[3];
    store_row(DWELL_F16, x, h, 3);
    EXPECT_EQ(h[0], 0x3c00);
    EXPECT_EQ(h[1], 0xc000);
    EXPECT_EQ(h[2], 0x2e66);  // 0.1 -> 0.0999755859375
    float f[3];
    store_row(DWELL_F32, x, f, 3);
    EXPECT_EQ(f[2], 0.1f);
}

}  // namespace
}  // namespace dwell::cpu
