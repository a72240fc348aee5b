// The ggml-compatible formats Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: blocks with
// hand-chosen bytes against values worked out from the format description,
// and the SDK reference decoders against the CPU backend's row readers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "cpu_test_graph.hpp"
#include "dwell/quant.h"
#include "simd/weight_rows.hpp"

namespace dwell::cpu {
namespace {

using test::ref_decode_row;

constexpr dwell_dtype kNewDtypes[] = {DWELL_Q4_1, DWELL_Q5_0, DWELL_Q5_1,
                                      DWELL_Q4_K, DWELL_Q5_K, DWELL_Q6_K};

void put16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v & 0xff);
    p[1] = static_cast<uint8_t>(v >> 8);
}

// Decodes with the CPU backend and checks every element against `expected`,
// and against the test's double-precision decoder.
void expect_block(dwell_dtype t, const std::vector<uint8_t>& block,
                  const std::vector<double>& expected) {
    const auto n = static_cast<int64_t>(expected.size());
    ASSERT_EQ(block.size(), dwell_row_bytes(t, n));
    std::vector<float> out(expected.size());
    dequantize_row(t, block.data(), out.data(), n);
    const auto ref = ref_decode_row(t, block.data(), n);
    for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(out[i], static_cast<float>(expected[i])) << dwell_dtype_name(t) << " " << i;
        EXPECT_EQ(ref[i], expected[i]) << dwell_dtype_name(t) << " " << i;
    }
}

TEST(KQuant, LayoutsMatchGgml) {
    EXPECT_EQ(dwell_dtype_block_bytes(DWELL_Q4_1), 20u);
    EXPECT_EQ(dwell_dtype_block_bytes(DWELL_Q5_0), 22u);
    EXPECT_EQ(dwell_dtype_block_bytes(DWELL_Q5_1), 24u);
    EXPECT_EQ(dwell_dtype_block_bytes(DWELL_Q4_K), 144u);
    EXPECT_EQ(dwell_dtype_block_bytes(DWELL_Q5_K), 176u);
    EXPECT_EQ(dwell_dtype_block_bytes(DWELL_Q6_K), 210u);
    for (dwell_dtype t : {DWELL_Q4_1, DWELL_Q5_0, DWELL_Q5_1})
        EXPECT_EQ(dwell_dtype_block_elems(t), 32);
    for (dwell_dtype t : {DWELL_Q4_K, DWELL_Q5_K, DWELL_Q6_K})
        EXPECT_EQ(dwell_dtype_block_elems(t), 256);
    EXPECT_EQ(offsetof(dwell_block_q5_0, qs), 6u);
    EXPECT_EQ(offsetof(dwell_block_q5_1, qs), 8u);
    EXPECT_EQ(offsetof(dwell_block_q4_K, qs), 16u);
    EXPECT_EQ(offsetof(dwell_block_q5_K, qh), 16u);
    EXPECT_EQ(offsetof(dwell_block_q5_K, qs), 48u);
    EXPECT_EQ(offsetof(dwell_block_q6_K, scales), 192u);
    EXPECT_EQ(offsetof(dwell_block_q6_K, d), 208u);
    EXPECT_STREQ(dwell_dtype_name(DWELL_Q5_K), "q5_k");
    EXPECT_STREQ(dwell_dtype_name(DWELL_Q4_1), "q4_1");
}

TEST(KQuant, Q4_1KnownBlock) {
    // d = 0.5, m = -2; byte j holds j (element j) and 15 - j (element j + 16).
    std::vector<uint8_t> b(20);
    put16(&b[0], 0x3800);
    put16(&b[2], 0xc000);
    for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    std::vector<double> want(32);
    for (int j = 0; j < 16; ++j) {
        want[j] = 0.5 * j - 2;
        want[16 + j] = 0.5 * (15 - j) - 2;
    }
    expect_block(DWELL_Q4_1, b, want);
}

// qh = 0f f0 aa 55: fifth bits 1 for elements 0-3 and 12-15; for elements
// 16-31 the pattern alternates 0 1 0 1 ... then 1 0 1 0 ...
constexpr int kHighLo[16] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
constexpr int kHighHi[16] = {0, 1, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 1, 0};

TEST(KQuant, Q5_0KnownBlock) {
    std::vector<uint8_t> b(22);
    put16(&b[0], 0x3400);  // d = 0.25
    const uint8_t qh[4] = {0x0f, 0xf0, 0xaa, 0x55};
    memcpy(&b[2], qh, 4);
    for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    std::vector<double> want(32);
    for (int j = 0; j < 16; ++j) {
        want[j] = 0.25 * (j + 16 * kHighLo[j] - 16);
        want[16 + j] = 0.25 * (15 - j + 16 * kHighHi[j] - 16);
    }
    expect_block(DWELL_Q5_0, b, want);
}

TEST(KQuant, Q5_1KnownBlock) {
    std::vector<uint8_t> b(24);
    put16(&b[0], 0x3800);  // d = 0.5
    put16(&b[2], 0x3c00);  // m = 1
    const uint8_t qh[4] = {0x0f, 0xf0, 0xaa, 0x55};
    memcpy(&b[4], qh, 4);
    for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    std::vector<double> want(32);
    for (int j = 0; j < 16; ++j) {
        want[j] = 0.5 * (j + 16 * kHighLo[j]) + 1;
        want[16 + j] = 0.5 * (15 - j + 16 * kHighHi[j]) + 1;
    }
    expect_block(DWELL_Q5_1, b, want);
}

// Sub-block scales and mins for the Q4_K / Q5_K blocks; those of sub-blocks
// 4..7 exceed 15 so that their top two bits matter.
constexpr int kSc[8] = {1, 2, 3, 4, 43, 50, 17, 63};
constexpr int kMn[8] = {0, 5, 10, 63, 35, 20, 16, 1};

// Packs the 6-bit numbers: bytes 0..3 scales 0..3, bytes 4..7 mins 0..3,
// bytes 8..11 the low nibbles of scale / min 4..7 (scale low, min high); the
// top 2 bits of scale j + 4 go to the top of byte j and those of min j + 4
// to the top of byte j + 4.
void pack_k_scales(uint8_t* s) {
    for (int j = 0; j < 4; ++j) {
        s[j] = static_cast<uint8_t>(kSc[j] | ((kSc[j + 4] >> 4) << 6));
        s[j + 4] = static_cast<uint8_t>(kMn[j] | ((kMn[j + 4] >> 4) << 6));
        s[j + 8] = static_cast<uint8_t>((kSc[j + 4] & 15) | ((kMn[j + 4] & 15) << 4));
    }
}

TEST(KQuant, Q4_KKnownBlock) {
    std::vector<uint8_t> b(144);
    put16(&b[0], 0x3800);  // d = 0.5
    put16(&b[2], 0x3400);  // dmin = 0.25
    pack_k_scales(&b[4]);
    // Hand-checked bytes of the packing: sc 43 = 0b101011, mn 35 = 0b100011.
    EXPECT_EQ(b[4 + 0], 1 | (2 << 6));
    EXPECT_EQ(b[4 + 8], 11 | (3 << 4));
    for (int k = 0; k < 128; ++k) b[16 + k] = static_cast<uint8_t>(k * 7 + 3);
    std::vector<double> want(256);
    for (int pair = 0; pair < 4; ++pair) {
        for (int l = 0; l < 32; ++l) {
            const int byte = b[16 + 32 * pair + l];
            const int lo = 2 * pair, hi = 2 * pair + 1;
            want[64 * pair + l] = 0.5 * kSc[lo] * (byte & 15) - 0.25 * kMn[lo];
            want[64 * pair + 32 + l] = 0.5 * kSc[hi] * (byte >> 4) - 0.25 * kMn[hi];
        }
    }
    // Two spot values worked out by hand: element 0 is nibble 3 of sub-block
    // 0 (0.5 * 1 * 3 - 0); element 167 is the high nibble of qs[71] =
    // (71 * 7 + 3) mod 256 = 244 -> 15, in sub-block 5: 0.5 * 50 * 15 - 5.
    EXPECT_EQ(want[0], 1.5);
    EXPECT_EQ(want[167], 370.0);
    expect_block(DWELL_Q4_K, b, want);
}

TEST(KQuant, Q5_KKnownBlock) {
    std::vector<uint8_t> b(176);
    put16(&b[0], 0x3800);
    put16(&b[2], 0x3400);
    pack_k_scales(&b[4]);
    for (int l = 0; l < 32; ++l) b[16 + l] = static_cast<uint8_t>(l * 37 + 5);  // qh
    for (int k = 0; k < 128; ++k) b[48 + k] = static_cast<uint8_t>(k * 7 + 3);
    std::vector<double> want(256);
    for (int s = 0; s < 8; ++s) {
        for (int l = 0; l < 32; ++l) {
            const int byte = b[48 + 32 * (s / 2) + l];
            const int nib = s % 2 == 0 ? byte & 15 : byte >> 4;
            const int q = nib + 16 * ((b[16 + l] >> s) & 1);  // bit s of qh[l]
            want[32 * s + l] = 0.5 * kSc[s] * q - 0.25 * kMn[s];
        }
    }
    expect_block(DWELL_Q5_K, b, want);
}

TEST(KQuant, Q6_KKnownBlock) {
    // All quants zero except a few: a zero 6-bit quant is -32 after the
    // offset. Scales are 9 s - 70 for sub-block s, d = 0.125.
    std::vector<uint8_t> b(210, 0);
    for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(9 * s - 70));
    put16(&b[208], 0x3000);
    b[5] = 0x3a;        // element 5 low nibble 10, element 69 high nibble 3
    b[37] = 0xc1;       // element 37 low nibble 1, element 101 high nibble 12
    b[128 + 5] = 0xd8;  // top bits: element 5 -> 0, 37 -> 2, 69 -> 1, 101 -> 3
    b[64 + 20] = 0x7f;  // second half: element 148 low nibble 15, 212 high nibble 7
    std::vector<double> want(256);
    for (int e = 0; e < 256; ++e) want[e] = 0.125 * (9 * (e / 16) - 70) * -32;
    want[5] = 0.125 * (9 * 0 - 70) * (10 - 32);
    want[37] = 0.125 * (9 * 2 - 70) * (1 + 32 - 32);
    want[69] = 0.125 * (9 * 4 - 70) * (3 + 16 - 32);
    want[101] = 0.125 * (9 * 6 - 70) * (12 + 48 - 32);
    want[148] = 0.125 * (9 * 9 - 70) * (15 - 32);
    want[212] = 0.125 * (9 * 13 - 70) * (7 - 32);
    expect_block(DWELL_Q6_K, b, want);
}

TEST(KQuant, SdkDecoderMatchesCpuRowsAtAnyAlignment) {
    for (dwell_dtype t : kNewDtypes) {
        const int64_t n = 4 * dwell_dtype_block_elems(t) + (t == DWELL_Q4_K ? 256 : 0);
        const auto bytes = test::random_weight_rows(t, n, 1, 41);
        std::vector<float> sdk(static_cast<size_t>(n));
        ASSERT_EQ(dwell_dequantize_row(t, bytes.data(), sdk.data(), n), 0);
        const auto x = test::random_floats(static_cast<size_t>(n), 42);
        double ref = 0, mag = 0;
        for (size_t i = 0; i < sdk.size(); ++i) {
            ref += static_cast<double>(sdk[i]) * x[i];
            mag += std::fabs(static_cast<double>(sdk[i]) * x[i]);
        }
        // The CPU readers must not assume block alignment: mapped GGUF rows
        // can start at any byte.
        for (size_t shift : {0, 1, 3}) {
            std::vector<uint8_t> moved(bytes.size() + shift);
            memcpy(moved.data() + shift, bytes.data(), bytes.size());
            std::vector<float> cpu(sdk.size(), -1.0f);
            dequantize_row(t, moved.data() + shift, cpu.data(), n);
            EXPECT_EQ(0, memcmp(cpu.data(), sdk.data(), sdk.size() * sizeof(float)))
                << dwell_dtype_name(t) << " shift " << shift;
            EXPECT_NEAR(dot_row(t, moved.data() + shift, x.data(), n), ref,
                        1e-6 * static_cast<double>(n) * mag + 1e-7)
                << dwell_dtype_name(t) << " shift " << shift;
        }
    }
}

TEST(KQuant, CpuAcceptsTheNewDtypesAsWeights) {
    for (dwell_dtype t : kNewDtypes) EXPECT_TRUE(is_weight_dtype(t)) << dwell_dtype_name(t);
}

TEST(KQuant, CpyDequantizesToF32) {
    for (dwell_dtype t : kNewDtypes) {
        const int64_t n = 256, rows = 2;
        test::TestGraph g;
        const int q = g.tensor(t, {n, rows});
        const int f = g.tensor(DWELL_F32, {n, rows}, 8);
        const auto bytes = test::random_weight_rows(t, n, rows, 17);
        g.set_raw_rows(q, bytes);
        g.node(DWELL_OP_CPY, f, {q});
        const auto p = g.run(2);
        ASSERT_FALSE(p) << p->message;
        const auto got = g.f32(f);
        const auto ref = ref_decode_row(t, bytes.data(), n * rows);
        for (size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(got[i], static_cast<float>(ref[i])) << dwell_dtype_name(t) << " " << i;
    }
}

}  // namespace
}  // namespace dwell::cpu
