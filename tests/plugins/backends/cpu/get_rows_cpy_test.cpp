// GET_ROWS for every weight dtype and CPY conversions: hand-computed
// quantized blocks, exact round trips where the format allows, error bounds
// where it does not, and strided (padded) rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cpu_test_graph.hpp"

namespace dwell::cpu {
namespace {

using test::TestGraph;

TEST(GetRows, EveryWeightDtypeMatchesReferenceDecoder) {
    for (dwell_dtype t : test::kWeightDtypes) {
        const int64_t n = dwell_dtype_block_elems(t) == DWELL_QK_K ? 512 : 96, rows = 7;
        TestGraph g;
        const int table = g.tensor(t, {n, rows});
        const int ids = g.tensor(DWELL_I32, {4});
        const int out = g.tensor(DWELL_F32, {n, 4}, 20);
        const auto bytes = test::random_weight_rows(t, n, rows, 3);
        g.set_raw_rows(table, bytes);
        const std::vector<int32_t> id = {6, 0, 6, 3};
        g.set(ids, id);
        g.node(DWELL_OP_GET_ROWS, out, {table, ids});
        const auto p = g.run(3);
        ASSERT_FALSE(p) << p->message;
        const auto got = g.f32(out);
        const size_t rb = dwell_row_bytes(t, n);
        for (size_t i = 0; i < id.size(); ++i) {
            const auto ref =
                test::ref_decode_row(t, bytes.data() + static_cast<size_t>(id[i]) * rb, n);
            for (int64_t j = 0; j < n; ++j) {
                EXPECT_EQ(got[i * n + static_cast<size_t>(j)],
                          static_cast<float>(ref[static_cast<size_t>(j)]))
                    << dwell_dtype_name(t) << " " << i << " " << j;
            }
        }
    }
}

TEST(GetRows, IdOutsideTheTableIsAnError) {
    TestGraph g;
    const int table = g.tensor(DWELL_F32, {4, 3});
    const int ids = g.tensor(DWELL_I32, {1});
    const int out = g.tensor(DWELL_F32, {4, 1});
    g.set<int32_t>(ids, {-1});
    g.node(DWELL_OP_GET_ROWS, out, {table, ids});
    const auto p = g.run();
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(p->message.find("node 0 (get_rows)"), std::string::npos) << p->message;
}

TEST(Cpy, F32ToQ4_0HandComputedBlock) {
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {32});
    const int q = g.tensor(DWELL_Q4_0, {32});
    std::vector<float> xs(32, 0.0f);
    xs[0] = -8;  // the largest magnitude: d = -8 / -8 = 1
    xs[1] = 3;
    xs[17] = -2.2f;
    g.set(x, xs);
    g.node(DWELL_OP_CPY, q, {x});
    ASSERT_FALSE(g.run());
    const auto b = g.raw_rows(q);
    EXPECT_EQ(b[0] | (b[1] << 8), 0x3c00);  // d = 1
    EXPECT_EQ(b[2] & 15, 0);                // -8 + 8.5 -> 0
    EXPECT_EQ(b[3] & 15, 11);               // 3 + 8.5 -> 11
    EXPECT_EQ(b[2 + 1] >> 4, 6);            // element 17: -2.2 + 8.5 = 6.3 -> 6
    EXPECT_EQ(b[2 + 5] & 15, 8);            // zero -> 8
}

TEST(Cpy, ConversionsAndRoundTrips) {
    const int64_t n = 64, rows = 3;
    const auto xs = test::random_floats(static_cast<size_t>(n * rows), 8, -4.0f, 4.0f);
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {n, rows}, 12);
    g.set(x, xs);
    struct Conv {
        dwell_dtype t;
        int there, back;
    };
    std::vector<Conv> convs;
    for (dwell_dtype t : {DWELL_F32, DWELL_F16, DWELL_BF16, DWELL_Q8_0, DWELL_Q4_0}) {
        Conv c{t, g.tensor(t, {n, rows}, 4), g.tensor(DWELL_F32, {n, rows})};
        g.node(DWELL_OP_CPY, c.there, {x});
        g.node(DWELL_OP_CPY, c.back, {c.there});
        convs.push_back(c);
    }
    const auto p = g.run(3);
    ASSERT_FALSE(p) << p->message;
    for (const Conv& c : convs) {
        const auto back = g.f32(c.back);
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t b = 0; b < n / 32; ++b) {
                double amax = 0;
                for (int j = 0; j < 32; ++j)
                    amax = std::max(amax, std::fabs(double(xs[r * n + b * 32 + j])));
                for (int j = 0; j < 32; ++j) {
                    const size_t i = static_cast<size_t>(r * n + b * 32 + j);
                    const double v = xs[i];
                    double tol = 0;
                    switch (c.t) {
                        case DWELL_F32:
                            tol = 0;
                            break;
                        case DWELL_F16:
                            tol = std::fabs(v) * std::ldexp(1.0, -11);
                            break;
                        case DWELL_BF16:
                            tol = std::fabs(v) * std::ldexp(1.0, -8);
                            break;
                        case DWELL_Q8_0:
                            tol = amax / 127 * (0.5 + 127.0 / 2048);
                            break;
                        case DWELL_Q4_0:
                            tol = amax / 8 * (1.0 + 8.0 / 2048);
                            break;
                        default:
                            break;
                    }
                    EXPECT_LE(std::fabs(back[i] - v), tol + 1e-7)
                        << dwell_dtype_name(c.t) << " " << i;
                }
            }
        }
        // Exact for F16: the F16 bits are those the SDK converter gives.
        if (c.t == DWELL_F16) {
            const auto raw = g.raw_rows(c.there);
            for (size_t i = 0; i < xs.size(); ++i) {
                uint16_t h;
                memcpy(&h, raw.data() + 2 * i, 2);
                EXPECT_EQ(h, dwell_fp32_to_fp16(xs[i])) << i;
            }
        }
    }
}

TEST(Cpy, SameDtypeCopiesBytesAndReshapesRows) {
    TestGraph g;
    const int a = g.tensor(DWELL_I32, {2, 3});
    const int b = g.tensor(DWELL_I32, {2, 1, 3}, 8);  // same rows, other shape
    g.set<int32_t>(a, {1, 2, 3, 4, 5, 6});
    g.node(DWELL_OP_CPY, b, {a});
    const int q = g.tensor(DWELL_Q8_0, {32, 2});
    const int q2 = g.tensor(DWELL_Q8_0, {32, 2}, 2);
    const auto qb = test::random_weight_rows(DWELL_Q8_0, 32, 2, 5);
    g.set_raw_rows(q, qb);
    g.node(DWELL_OP_CPY, q2, {q});
    ASSERT_FALSE(g.run());
    EXPECT_EQ(g.i32(b), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(g.raw_rows(q2), qb);
}

TEST(Cpy, RejectsUnsupportedConversions) {
    TestGraph g;
    const int i = g.tensor(DWELL_I32, {32});
    const int f = g.tensor(DWELL_F32, {32});
    const int k = g.tensor(DWELL_FP8_E4M3, {32});
    const int f_short = g.tensor(DWELL_F32, {16});
    const int n1 = g.node(DWELL_OP_CPY, f, {i});
    const int n2 = g.node(DWELL_OP_CPY, i, {f});
    const int n3 = g.node(DWELL_OP_CPY, f_short, {f});
    const int n4 = g.node(DWELL_OP_CPY, f, {k});
    EXPECT_EQ(g.check(n1)->status, DWELL_ERR_UNSUPPORTED);
    EXPECT_EQ(g.check(n2)->status, DWELL_ERR_UNSUPPORTED);
    EXPECT_EQ(g.check(n3)->status, DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(g.check(n4));
}

}  // namespace
}  // namespace dwell::cpu
