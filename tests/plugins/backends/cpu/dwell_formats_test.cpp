// The dwell row formats I4_G, I6_G and I8_C: hand-built rows with known
// bytes decode to known values (through the SDK, the cpu backend and the
// tests' independent decoder), the backend agrees with the SDK on random
// rows at any alignment, and the SDK encoders stay within their error
// bounds, beat plain min/max, and survive NaN and infinities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_test_graph.hpp"
#include "dwell/quant.h"
#include "quant/row_quantize.hpp"
#include "simd/weight_rows.hpp"

namespace dwell::cpu {
namespace {

using test::TestGraph;

constexpr dwell_dtype kRowFormats[] = {DWELL_I4_G, DWELL_I6_G, DWELL_I8_C};

void put16(std::vector<uint8_t>& out, uint16_t h) {
    out.push_back(static_cast<uint8_t>(h & 0xff));
    out.push_back(static_cast<uint8_t>(h >> 8));
}

// Appends codes as a little-endian bit stream, one bit at a time (a packer
// independent of the SDK's), zero-padded to a whole byte.
void put_codes(std::vector<uint8_t>& out, const std::vector<int>& codes, int bits) {
    std::vector<uint8_t> stream((codes.size() * static_cast<size_t>(bits) + 7) / 8, 0);
    for (size_t k = 0; k < codes.size(); ++k) {
        for (int b = 0; b < bits; ++b) {
            const size_t bit = k * static_cast<size_t>(bits) + static_cast<size_t>(b);
            if ((codes[k] >> b) & 1) stream[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
        }
    }
    out.insert(out.end(), stream.begin(), stream.end());
}

// Decodes one row three ways (SDK, cpu backend, the tests' reference
// decoder) and expects each to give exactly `want`.
void expect_decodes_to(dwell_dtype t, const std::vector<uint8_t>& row,
                       const std::vector<float>& want) {
    const auto n = static_cast<int64_t>(want.size());
    ASSERT_EQ(row.size(), dwell_row_bytes(t, n)) << dwell_dtype_name(t) << " n=" << n;
    std::vector<float> sdk(want.size()), cpu(want.size());
    ASSERT_EQ(dwell_dequantize_row(t, row.data(), sdk.data(), n), 0);
    dequantize_row(t, row.data(), cpu.data(), n);
    const auto ref = test::ref_decode_row(t, row.data(), n);
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(sdk[i], want[i]) << dwell_dtype_name(t) << " sdk " << i;
        EXPECT_EQ(cpu[i], want[i]) << dwell_dtype_name(t) << " cpu " << i;
        EXPECT_EQ(static_cast<float>(ref[i]), want[i]) << dwell_dtype_name(t) << " ref " << i;
    }
}

TEST(DwellFormats, RowBytesAndNames) {
    EXPECT_EQ(DWELL_I4_G, 7);  // ABI: existing values never move
    EXPECT_EQ(DWELL_I6_G, 14);
    EXPECT_EQ(DWELL_I8_C, 15);
    EXPECT_EQ(DWELL_I4_G64, 16);  // appended after 1.0's first formats
    EXPECT_EQ(DWELL_I4_G32, 17);
    EXPECT_EQ(DWELL_DTYPE_COUNT, 18);
    EXPECT_STREQ(dwell_dtype_name(DWELL_I4_G), "i4g128");
    EXPECT_STREQ(dwell_dtype_name(DWELL_I6_G), "i6g128");
    EXPECT_STREQ(dwell_dtype_name(DWELL_I8_C), "i8c");
    for (dwell_dtype t : kRowFormats) {
        EXPECT_TRUE(dwell_dtype_is_row_format(t));
        EXPECT_EQ(dwell_dtype_block_elems(t), 1);
        EXPECT_EQ(dwell_dtype_block_bytes(t), 1u);
        EXPECT_EQ(dwell_row_bytes(t, 0), 0u);
        EXPECT_EQ(dwell_row_bytes(t, -5), 0u);
    }
    EXPECT_FALSE(dwell_dtype_is_row_format(DWELL_Q4_0));
    // I4_G: 4 bytes of header per group + ceil(n / 2).
    for (int64_t n : {1, 2, 3, 64, 127, 128, 129, 172, 256, 300, 4096}) {
        const int64_t ng = (n + 127) / 128;
        EXPECT_EQ(dwell_row_bytes(DWELL_I4_G, n), static_cast<size_t>(4 * ng + (n + 1) / 2)) << n;
        EXPECT_EQ(dwell_row_bytes(DWELL_I8_C, n), static_cast<size_t>(4 + n)) << n;
    }
    // I6_G: every group's stream is padded to a whole byte on its own.
    EXPECT_EQ(dwell_row_bytes(DWELL_I6_G, 1), 4u + 1u);
    EXPECT_EQ(dwell_row_bytes(DWELL_I6_G, 4), 4u + 3u);
    EXPECT_EQ(dwell_row_bytes(DWELL_I6_G, 5), 4u + 4u);
    EXPECT_EQ(dwell_row_bytes(DWELL_I6_G, 64), 4u + 48u);
    EXPECT_EQ(dwell_row_bytes(DWELL_I6_G, 128), 4u + 96u);
    EXPECT_EQ(dwell_row_bytes(DWELL_I6_G, 129), 100u + 4u + 1u);
    EXPECT_EQ(dwell_row_bytes(DWELL_I6_G, 172), 100u + 4u + 33u);
    EXPECT_EQ(dwell_row_bytes(DWELL_I6_G, 131), 100u + 4u + 3u);  // 18 bits -> 3 bytes
    EXPECT_EQ(dwell_row_bytes(DWELL_I4_G, 172), 68u + 4u + 22u);

    // A [172, 3] tensor is contiguous with nb[0] = 1.
    dwell_tensor t{};
    t.dtype = DWELL_I6_G;
    t.n_dims = 2;
    t.ne[0] = 172;
    t.ne[1] = 3;
    t.ne[2] = t.ne[3] = 1;
    t.nb[0] = 1;
    t.nb[1] = 137;
    t.nb[2] = t.nb[3] = 3 * 137;
    EXPECT_TRUE(dwell_tensor_is_contiguous(&t));
}

TEST(DwellFormats, I4HandBuiltLiteralRow) {
    // d = 1 (0x3c00), m = -2 (0xc000), codes 1, 2, 3; the odd code count
    // leaves the last high nibble as padding.
    const std::vector<uint8_t> row = {0x00, 0x3c, 0x00, 0xc0, 0x21, 0x03};
    expect_decodes_to(DWELL_I4_G, row, {-1.0f, 0.0f, 1.0f});
}

TEST(DwellFormats, I6HandBuiltLiteralRow) {
    // d = 0.5 (0x3800), m = -16 (0xcc00), codes 0, 63, 1, 62, 5 in 30 bits:
    // byte 0 = c0 | c1 << 6, byte 1 = c1 >> 2 | c2 << 4, byte 2 = c2 >> 4 |
    // c3 << 2, byte 3 = c4.
    const std::vector<uint8_t> row = {0x00, 0x38, 0x00, 0xcc, 0xc0, 0x1f, 0xf8, 0x05};
    expect_decodes_to(DWELL_I6_G, row, {-16.0f, 15.5f, -15.5f, 15.0f, -13.5f});
}

TEST(DwellFormats, I8HandBuiltLiteralRow) {
    // d = 0.25f (0x3e800000 little-endian), codes 1, -1, 127, -128, 0.
    const std::vector<uint8_t> row = {0x00, 0x00, 0x80, 0x3e, 0x01, 0xff, 0x7f, 0x80, 0x00};
    expect_decodes_to(DWELL_I8_C, row, {0.25f, -0.25f, 31.75f, -32.0f, 0.0f});
}

// A row of n values in groups with known d, m and codes, built by hand.
struct GroupRow {
    std::vector<uint8_t> bytes;
    std::vector<float> values;
};

GroupRow group_row(int bits, int64_t n) {
    const uint16_t d_bits[2] = {0x3800, 0x4000};  // 0.5, 2
    const float d_val[2] = {0.5f, 2.0f};
    const uint16_t m_bits[2] = {0xbc00, 0x3400};  // -1, 0.25
    const float m_val[2] = {-1.0f, 0.25f};
    const int levels = 1 << bits;
    GroupRow r;
    for (int64_t g = 0; g * 128 < n; ++g) {
        const int64_t len = std::min<int64_t>(128, n - g * 128);
        put16(r.bytes, d_bits[g % 2]);
        put16(r.bytes, m_bits[g % 2]);
        std::vector<int> codes;
        for (int64_t k = 0; k < len; ++k) {
            const int c = static_cast<int>((k * (g + 1) * 7 + g) % levels);
            codes.push_back(c);
            r.values.push_back(static_cast<float>(c) * d_val[g % 2] + m_val[g % 2]);
        }
        put_codes(r.bytes, codes, bits);
    }
    return r;
}

TEST(DwellFormats, GroupRowsOf172And64) {
    for (int bits : {4, 6}) {
        const dwell_dtype t = bits == 4 ? DWELL_I4_G : DWELL_I6_G;
        // 172 = one full group and a partial one of 44; 64 = one partial group.
        for (int64_t n : {172, 64, 129, 1}) {
            const GroupRow r = group_row(bits, n);
            expect_decodes_to(t, r.bytes, r.values);
        }
    }
    // Spot checks of the layout itself: in I4_G the second group (d = 2,
    // m = 0.25) starts at byte 68; its first codes are 1 and 15.
    const GroupRow r = group_row(4, 172);
    EXPECT_EQ(r.bytes[68], 0x00);
    EXPECT_EQ(r.bytes[69], 0x40);
    EXPECT_EQ(r.bytes[72], 0xf1);
    EXPECT_EQ(r.values[128], 2.0f * 1 + 0.25f);
    EXPECT_EQ(r.values[129], 2.0f * 15 + 0.25f);
}

TEST(DwellFormats, I8RowOf172) {
    std::vector<uint8_t> row = {0x00, 0x00, 0x00, 0x3d};  // 0.03125f
    std::vector<float> want;
    for (int i = 0; i < 172; ++i) {
        const int c = (i * 37) % 256 - 128;
        row.push_back(static_cast<uint8_t>(static_cast<int8_t>(c)));
        want.push_back(static_cast<float>(c) * 0.03125f);
    }
    expect_decodes_to(DWELL_I8_C, row, want);
}

// The backend and the SDK read the same bits the same way, at any address.
TEST(DwellFormats, BackendMatchesSdkOnRandomRowsAtAnyAlignment) {
    for (dwell_dtype t : kRowFormats) {
        for (int64_t n : {1, 3, 63, 64, 127, 128, 129, 172, 256, 300, 1000}) {
            const auto row = test::random_weight_rows(t, n, 1, static_cast<uint32_t>(n + t));
            ASSERT_EQ(row.size(), dwell_row_bytes(t, n));
            const auto x = test::random_floats(static_cast<size_t>(n), 5);
            std::vector<float> sdk(static_cast<size_t>(n));
            ASSERT_EQ(dwell_dequantize_row(t, row.data(), sdk.data(), n), 0);
            const auto ref = test::ref_decode_row(t, row.data(), n);
            double dot = 0, mag = 0;
            for (int64_t i = 0; i < n; ++i) {
                ASSERT_EQ(sdk[static_cast<size_t>(i)],
                          static_cast<float>(ref[static_cast<size_t>(i)]))
                    << dwell_dtype_name(t) << " n=" << n << " i=" << i;
                dot += static_cast<double>(sdk[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
                mag += std::fabs(static_cast<double>(sdk[static_cast<size_t>(i)]) *
                                 x[static_cast<size_t>(i)]);
            }
            for (size_t shift : {0u, 1u, 3u}) {
                std::vector<uint8_t> buf(row.size() + 8);
                memcpy(buf.data() + shift, row.data(), row.size());
                std::vector<float> cpu(static_cast<size_t>(n), -7.0f);
                dequantize_row(t, buf.data() + shift, cpu.data(), n);
                EXPECT_EQ(0, memcmp(cpu.data(), sdk.data(), cpu.size() * sizeof(float)))
                    << dwell_dtype_name(t) << " n=" << n << " shift=" << shift;
                EXPECT_NEAR(dot_row(t, buf.data() + shift, x.data(), n), dot, 2e-5 * mag + 1e-7)
                    << dwell_dtype_name(t) << " n=" << n << " shift=" << shift;
            }
        }
    }
}

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// Squared error of plain min/max coding of one group with fp16 parameters.
double plain_minmax_sse(const float* x, int64_t len, int qmax) {
    const float mn = *std::min_element(x, x + len), mx = *std::max_element(x, x + len);
    const double d = dwell_fp16_to_fp32(dwell_fp32_to_fp16((mx - mn) / static_cast<float>(qmax)));
    const double m = dwell_fp16_to_fp32(dwell_fp32_to_fp16(mn));
    double sse = 0;
    for (int64_t i = 0; i < len; ++i) {
        const double c = d > 0 ? std::clamp(std::round((x[i] - m) / d), 0.0, double(qmax)) : 0.0;
        sse += (x[i] - (c * d + m)) * (x[i] - (c * d + m));
    }
    return sse;
}

TEST(DwellFormats, GroupEncoderErrorBoundsAndSearch) {
    for (int bits : {4, 6}) {
        const dwell_dtype t = bits == 4 ? DWELL_I4_G : DWELL_I6_G;
        const int qmax = (1 << bits) - 1;
        for (int64_t n : {1, 5, 64, 128, 172, 300, 1024}) {
            for (int dist = 0; dist < 3; ++dist) {
                std::vector<float> x =
                    dist == 0   ? gaussian(static_cast<size_t>(n), 11)
                    : dist == 1 ? test::random_floats(static_cast<size_t>(n), 12, -3.0f, 0.5f)
                                : gaussian(static_cast<size_t>(n), 13, 0.02f);
                if (dist == 2 && n > 10) x[7] = 0.5f;  // one outlier in a quiet group
                std::vector<uint8_t> row(dwell_row_bytes(t, n) + 1, 0xee);
                ASSERT_EQ(dwell_quantize_row(t, x.data(), row.data(), n), 0);
                EXPECT_EQ(row.back(), 0xee) << "wrote past the row";
                row.pop_back();
                std::vector<float> y(static_cast<size_t>(n));
                dwell_dequantize_row(t, row.data(), y.data(), n);

                const uint8_t* group = row.data();
                for (int64_t g = 0; g < n; g += 128) {
                    const int64_t len = std::min<int64_t>(128, n - g);
                    const double d =
                        test::ref_half(static_cast<uint16_t>(group[0] | group[1] << 8));
                    const double m =
                        test::ref_half(static_cast<uint16_t>(group[2] | group[3] << 8));
                    // Float rounding of code * d + m, and of the encoder's
                    // own arithmetic near a midpoint.
                    const double tol = 1e-6 * (std::fabs(m) + qmax * d) + 1e-9;
                    double sse = 0;
                    for (int64_t i = g; i < g + len; ++i) {
                        const double xi = x[static_cast<size_t>(i)];
                        const double err = std::fabs(xi - y[static_cast<size_t>(i)]);
                        sse += err * err;
                        // The code is the nearest level: no other code is closer.
                        double best = std::numeric_limits<double>::infinity();
                        for (int c = 0; c <= qmax; ++c)
                            best = std::min(best, std::fabs(xi - (c * d + m)));
                        EXPECT_LE(err, best + tol) << "bits=" << bits << " n=" << n << " i=" << i;
                        // Inside the coded range the error is at most half a step
                        // (plus the float rounding of code * d + m).
                        if (xi >= m && xi <= m + qmax * d) {
                            EXPECT_LE(err, d / 2 + tol)
                                << "bits=" << bits << " n=" << n << " i=" << i;
                        }
                    }
                    // Plain min/max is one of the candidates, so the search
                    // never does worse.
                    EXPECT_LE(sse, plain_minmax_sse(x.data() + g, len, qmax) * (1 + 1e-4) + 1e-12)
                        << "bits=" << bits << " n=" << n << " group " << g / 128;
                    // The padding bits of the stream are zero.
                    const int64_t stream_bits = len * bits;
                    const size_t stream_bytes = static_cast<size_t>((stream_bits + 7) / 8);
                    if (stream_bits % 8) {
                        EXPECT_EQ(group[4 + stream_bytes - 1] >> (stream_bits % 8), 0);
                    }
                    group += 4 + stream_bytes;
                }
                EXPECT_EQ(group, row.data() + row.size());
            }
        }
    }
}

TEST(DwellFormats, GroupEncoderBeatsPlainMinMaxOnGaussianData) {
    // Summed over many groups the range search must gain measurably.
    const auto x = gaussian(128 * 512, 21);
    for (int bits : {4, 6}) {
        const dwell_dtype t = bits == 4 ? DWELL_I4_G : DWELL_I6_G;
        const int64_t n = static_cast<int64_t>(x.size());
        std::vector<uint8_t> row(dwell_row_bytes(t, n));
        dwell_quantize_row(t, x.data(), row.data(), n);
        std::vector<float> y(x.size());
        dwell_dequantize_row(t, row.data(), y.data(), n);
        double sse = 0, plain = 0;
        for (size_t i = 0; i < x.size(); ++i) sse += (x[i] - y[i]) * double(x[i] - y[i]);
        for (int64_t g = 0; g < n; g += 128)
            plain += plain_minmax_sse(x.data() + g, 128, (1 << bits) - 1);
        EXPECT_LT(sse, plain * 0.97) << "bits=" << bits;
    }
}

TEST(DwellFormats, EncodersHandleConstantZeroAndExactRows) {
    for (dwell_dtype t : kRowFormats) {
        for (int64_t n : {1, 64, 172}) {
            const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
            std::vector<uint8_t> row(dwell_row_bytes(t, n));
            dwell_quantize_row(t, zeros.data(), row.data(), n);
            std::vector<float> y(static_cast<size_t>(n), 1.0f);
            dwell_dequantize_row(t, row.data(), y.data(), n);
            for (float v : y) EXPECT_EQ(v, 0.0f) << dwell_dtype_name(t);

            // A constant is exact up to the fp16 rounding of the group min.
            const std::vector<float> c(static_cast<size_t>(n), 0.7f);
            dwell_quantize_row(t, c.data(), row.data(), n);
            dwell_dequantize_row(t, row.data(), y.data(), n);
            for (float v : y) EXPECT_NEAR(v, 0.7f, 0.7f / 2048) << dwell_dtype_name(t);

            // Values on a grid of all 2^bits levels come back exactly (I8_C's
            // step max / 127 has no such grid in 0.25s, so it is skipped).
            if (t == DWELL_I8_C) continue;
            const int levels = t == DWELL_I4_G ? 16 : 64;
            const float lo = -0.125f * static_cast<float>(levels);
            const float hi = lo + 0.25f * static_cast<float>(levels - 1);
            std::vector<float> grid(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i)
                grid[static_cast<size_t>(i)] = lo + 0.25f * static_cast<float>(i % levels);
            for (int64_t g = 0; g + 1 < n; g += 128) {  // both ends in every group
                grid[static_cast<size_t>(g)] = lo;
                grid[static_cast<size_t>(g + 1)] = hi;
            }
            dwell_quantize_row(t, grid.data(), row.data(), n);
            dwell_dequantize_row(t, row.data(), y.data(), n);
            EXPECT_EQ(y, grid) << dwell_dtype_name(t) << " n=" << n;
        }
    }
}

TEST(DwellFormats, I8EncoderScaleAndErrorBound) {
    for (int64_t n : {1, 64, 172, 4096}) {
        auto x = gaussian(static_cast<size_t>(n), 31, 0.1f);
        std::vector<uint8_t> row(dwell_row_bytes(DWELL_I8_C, n));
        dwell_quantize_row_i8c(x.data(), row.data(), n);
        float amax = 0;
        for (float v : x) amax = std::max(amax, std::fabs(v));
        const float d = amax / 127.0f;
        float stored;
        const uint32_t bits = static_cast<uint32_t>(row[0]) | static_cast<uint32_t>(row[1]) << 8 |
                              static_cast<uint32_t>(row[2]) << 16 |
                              static_cast<uint32_t>(row[3]) << 24;
        memcpy(&stored, &bits, sizeof stored);
        EXPECT_EQ(stored, d);
        std::vector<float> y(x.size());
        dwell_dequantize_row_i8c(row.data(), y.data(), n);
        for (size_t i = 0; i < x.size(); ++i) {
            EXPECT_LE(std::fabs(x[i] - y[i]), d / 2 * (1 + 1e-4f)) << i;
            EXPECT_LE(std::abs(static_cast<int8_t>(row[4 + i])), 127);
        }
    }
    // Round half away from zero with d = 1 (max 127).
    const float x[6] = {127.0f, 0.5f, -0.5f, 1.49f, -126.6f, 2.5f};
    uint8_t row[10];
    dwell_quantize_row_i8c(x, row, 6);
    const int8_t want[6] = {127, 1, -1, 1, -127, 3};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<int8_t>(row[4 + i]), want[i]) << i;
}

TEST(DwellFormats, EncodersSurviveNanAndInfinity) {
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> x = test::random_floats(172, 41);
    x[0] = nan;
    x[5] = inf;
    x[6] = -inf;
    x[130] = 1e30f;
    x[131] = nan;
    x[140] = -1e30f;
    for (dwell_dtype t : kRowFormats) {
        std::vector<uint8_t> row(dwell_row_bytes(t, 172));
        dwell_quantize_row(t, x.data(), row.data(), 172);
        std::vector<float> y(172);
        dwell_dequantize_row(t, row.data(), y.data(), 172);
        for (size_t i = 0; i < y.size(); ++i)
            EXPECT_TRUE(std::isfinite(y[i])) << dwell_dtype_name(t) << i;
        if (t == DWELL_I8_C) {
            EXPECT_EQ(y[0], 0.0f);  // NaN codes as 0
            EXPECT_GT(y[5], 0.0f);  // infinities saturate
            EXPECT_LT(y[6], 0.0f);
        }
    }
    // All NaN: codes as zeros.
    const std::vector<float> nans(64, nan);
    for (dwell_dtype t : kRowFormats) {
        std::vector<uint8_t> row(dwell_row_bytes(t, 64));
        dwell_quantize_row(t, nans.data(), row.data(), 64);
        std::vector<float> y(64);
        dwell_dequantize_row(t, row.data(), y.data(), 64);
        for (float v : y) EXPECT_EQ(v, 0.0f) << dwell_dtype_name(t);
    }
}

// CPY quantizes with the SDK encoders (store_row), and GET_ROWS and MATMUL
// read the result back.
TEST(DwellFormats, CpyGetRowsAndMatmulThroughTheGraph) {
    for (dwell_dtype t : kRowFormats) {
        const int64_t n = 172, rows = 5;
        TestGraph g;
        const int x = g.tensor(DWELL_F32, {n, rows});
        const int q = g.tensor(t, {n, rows}, 3);  // padded rows: odd strides
        const int ids = g.tensor(DWELL_I32, {3});
        const int back = g.tensor(DWELL_F32, {n, 3});
        const int v = g.tensor(DWELL_F32, {n, 2});
        const int mm = g.tensor(DWELL_F32, {rows, 2});
        const auto xs = gaussian(static_cast<size_t>(n * rows), 51, 0.5f);
        const auto vs = test::random_floats(static_cast<size_t>(n * 2), 52);
        g.set(x, xs);
        g.set(v, vs);
        g.set<int32_t>(ids, {4, 0, 2});
        g.node(DWELL_OP_CPY, q, {x});
        g.node(DWELL_OP_GET_ROWS, back, {q, ids});
        g.node(DWELL_OP_MATMUL, mm, {q, v});
        const auto p = g.run(2);
        ASSERT_FALSE(p) << p->message;

        const size_t rb = dwell_row_bytes(t, n);
        std::vector<uint8_t> want(rb * rows);
        for (int64_t r = 0; r < rows; ++r)
            dwell_quantize_row(t, xs.data() + r * n, want.data() + r * rb, n);
        EXPECT_EQ(g.raw_rows(q), want) << dwell_dtype_name(t);

        const auto got = g.f32(back);
        const int rows_read[3] = {4, 0, 2};
        for (int i = 0; i < 3; ++i) {
            const auto ref = test::ref_decode_row(t, want.data() + rows_read[i] * rb, n);
            for (int64_t j = 0; j < n; ++j) {
                EXPECT_EQ(got[static_cast<size_t>(i * n + j)],
                          static_cast<float>(ref[static_cast<size_t>(j)]));
            }
        }
        const auto out = g.f32(mm);
        for (int64_t r = 0; r < rows; ++r) {
            const auto w = test::ref_decode_row(t, want.data() + r * rb, n);
            for (int64_t c = 0; c < 2; ++c) {
                double ref = 0, mag = 0;
                for (int64_t j = 0; j < n; ++j) {
                    ref += w[static_cast<size_t>(j)] * vs[static_cast<size_t>(c * n + j)];
                    mag +=
                        std::fabs(w[static_cast<size_t>(j)] * vs[static_cast<size_t>(c * n + j)]);
                }
                EXPECT_NEAR(out[static_cast<size_t>(c * rows + r)], ref, 2e-5 * mag + 1e-7);
            }
        }
    }
}

}  // namespace
}  // namespace dwell::cpu

// The backend's dequantize and dot for int4 with groups of 64 and 32 agree
// with the SDK decoder (a dot of decoded values, in double).
TEST(DwellFormats, SmallerGroupsBackendMatchesSdk) {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (dwell_dtype t : {DWELL_I4_G64, DWELL_I4_G32}) {
        for (int64_t n : {1, 33, 64, 100, 172, 513}) {
            std::vector<float> w(static_cast<size_t>(n)), x(static_cast<size_t>(n));
            for (float& v : w) v = normal(rng);
            for (float& v : x) v = normal(rng);
            std::vector<uint8_t> row(dwell_row_bytes(t, n));
            ASSERT_EQ(dwell_quantize_row(t, w.data(), row.data(), n), 0);
            std::vector<float> sdk(static_cast<size_t>(n)), backend(static_cast<size_t>(n));
            ASSERT_EQ(dwell_dequantize_row(t, row.data(), sdk.data(), n), 0);
            dwell::cpu::dequantize_row(t, row.data(), backend.data(), n);
            EXPECT_EQ(std::memcmp(sdk.data(), backend.data(), sdk.size() * sizeof(float)), 0)
                << dwell_dtype_name(t) << " n=" << n;
            double expect = 0, scale = 0;
            for (int64_t i = 0; i < n; ++i) {
                expect +=
                    static_cast<double>(sdk[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
                scale += std::abs(static_cast<double>(sdk[static_cast<size_t>(i)]) *
                                  x[static_cast<size_t>(i)]);
            }
            EXPECT_NEAR(dwell::cpu::dot_row(t, row.data(), x.data(), n), expect,
                        1e-5 * scale + 1e-6)
                << dwell_dtype_name(t) << " n=" << n;
        }
    }
}
