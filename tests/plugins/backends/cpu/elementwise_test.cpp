// ADD, MUL, SCALE, SILU, GELU, SWIGLU, SOFTMAX, RMS_NORM and LAYER_NORM
// against hand-computed values and double-precision references.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu_test_graph.hpp"

namespace dwell::cpu {
namespace {

using test::random_floats;
using test::TestGraph;

TEST(Elementwise, AddAndMulSameShapeAndBroadcast) {
    TestGraph g;
    const int a = g.tensor(DWELL_F32, {3, 2}, 4);  // padded rows
    const int b = g.tensor(DWELL_F32, {3, 2});
    const int v = g.tensor(DWELL_F32, {3});
    const int sum = g.tensor(DWELL_F32, {3, 2});
    const int prod = g.tensor(DWELL_F32, {3, 2}, 8);
    const int bsum = g.tensor(DWELL_F32, {3, 2});
    const int bprod = g.tensor(DWELL_F32, {3, 2});
    g.set<float>(a, {1, 2, 3, 4, 5, 6});
    g.set<float>(b, {10, 20, 30, 40, 50, 60});
    g.set<float>(v, {2, -1, 0.5f});
    g.node(DWELL_OP_ADD, sum, {a, b});
    g.node(DWELL_OP_MUL, prod, {a, b});
    g.node(DWELL_OP_ADD, bsum, {a, v});
    g.node(DWELL_OP_MUL, bprod, {a, v});
    const auto p = g.run(3);
    ASSERT_FALSE(p) << p->message;
    EXPECT_EQ(g.f32(sum), (std::vector<float>{11, 22, 33, 44, 55, 66}));
    EXPECT_EQ(g.f32(prod), (std::vector<float>{10, 40, 90, 160, 250, 360}));
    EXPECT_EQ(g.f32(bsum), (std::vector<float>{3, 1, 3.5f, 6, 4, 6.5f}));
    EXPECT_EQ(g.f32(bprod), (std::vector<float>{2, -2, 1.5f, 8, -5, 3}));
}

TEST(Elementwise, InPlaceAddAndBadBroadcastRejected) {
    TestGraph g;
    const int a = g.tensor(DWELL_F32, {2, 2});
    const int b = g.tensor(DWELL_F32, {2, 2});
    const int wrong = g.tensor(DWELL_F32, {3});
    g.set<float>(a, {1, 2, 3, 4});
    g.set<float>(b, {1, 1, 1, 1});
    g.node(DWELL_OP_ADD, a, {a, b});
    ASSERT_FALSE(g.run());
    EXPECT_EQ(g.f32(a), (std::vector<float>{2, 3, 4, 5}));
    const int bad = g.node(DWELL_OP_ADD, a, {a, wrong});
    EXPECT_EQ(g.check(bad)->status, DWELL_ERR_INVALID_ARGUMENT);
}

TEST(Elementwise, ScaleSiluGeluSwigluMatchDoubleFormulas) {
    const auto xs = random_floats(4 * 33, 5, -6.0f, 6.0f);
    const auto us = random_floats(4 * 33, 6, -2.0f, 2.0f);
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {33, 4});
    const int u = g.tensor(DWELL_F32, {33, 4});
    const int scaled = g.tensor(DWELL_F32, {33, 4});
    const int silu = g.tensor(DWELL_F32, {33, 4});
    const int gelu = g.tensor(DWELL_F32, {33, 4});
    const int swiglu = g.tensor(DWELL_F32, {33, 4});
    g.set(x, xs);
    g.set(u, us);
    g.node(DWELL_OP_SCALE, scaled, {x}, {}, {-0.25f});
    g.node(DWELL_OP_SILU, silu, {x});
    g.node(DWELL_OP_GELU, gelu, {x});
    g.node(DWELL_OP_SWIGLU, swiglu, {x, u});
    ASSERT_FALSE(g.run(2));
    const auto s = g.f32(scaled), si = g.f32(silu), ge = g.f32(gelu), sw = g.f32(swiglu);
    for (size_t i = 0; i < xs.size(); ++i) {
        const double v = xs[i];
        const double sig = 1.0 / (1.0 + std::exp(-v));
        const double gel =
            0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
        EXPECT_EQ(s[i], xs[i] * -0.25f);
        EXPECT_NEAR(si[i], v * sig, 1e-6 * (1 + std::fabs(v)));
        EXPECT_NEAR(ge[i], gel, 1e-6 * (1 + std::fabs(v)));
        EXPECT_NEAR(sw[i], v * sig * us[i], 1e-6 * (1 + std::fabs(v * us[i])));
    }
}

TEST(Elementwise, GeluKnownValues) {
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {3});
    const int y = g.tensor(DWELL_F32, {3});
    g.set<float>(x, {0.0f, 1.0f, -1.0f});
    g.node(DWELL_OP_GELU, y, {x});
    ASSERT_FALSE(g.run());
    const auto r = g.f32(y);
    EXPECT_EQ(r[0], 0.0f);
    EXPECT_NEAR(r[1], 0.841191990, 1e-6);  // tanh-approximate GELU(1)
    EXPECT_NEAR(r[2], -0.158808010, 1e-6);
}

TEST(Softmax, HandComputedOneTwoThree) {
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {3, 2});
    const int y = g.tensor(DWELL_F32, {3, 2});
    g.set<float>(x, {1, 2, 3, 1000, 1000, 1000});
    g.node(DWELL_OP_SOFTMAX, y, {x});
    ASSERT_FALSE(g.run());
    const auto r = g.f32(y);
    // e^0, e^1, e^2 over their sum 1 + e + e^2 = 11.107337927...
    EXPECT_NEAR(r[0], 0.09003057317, 1e-7);
    EXPECT_NEAR(r[1], 0.24472847105, 1e-7);
    EXPECT_NEAR(r[2], 0.66524095577, 1e-7);
    // Max subtraction keeps large equal logits finite.
    for (int i = 3; i < 6; ++i) EXPECT_NEAR(r[static_cast<size_t>(i)], 1.0 / 3.0, 1e-7);
}

TEST(Norms, RmsAndLayerNormMatchDoubleReference) {
    const int64_t n = 50, rows = 3;
    const auto xs = random_floats(static_cast<size_t>(n * rows), 17, -3.0f, 5.0f);
    const float eps = 1e-5f;
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {n, rows}, 16);
    const int rms = g.tensor(DWELL_F32, {n, rows});
    const int ln = g.tensor(DWELL_F32, {n, rows});
    g.set(x, xs);
    g.node(DWELL_OP_RMS_NORM, rms, {x}, {}, {eps});
    g.node(DWELL_OP_LAYER_NORM, ln, {x}, {}, {eps});
    ASSERT_FALSE(g.run(3));
    const auto r = g.f32(rms), l = g.f32(ln);
    for (int64_t row = 0; row < rows; ++row) {
        double ss = 0, mean = 0, var = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double v = xs[static_cast<size_t>(row * n + i)];
            ss += v * v;
            mean += v;
        }
        mean /= n;
        for (int64_t i = 0; i < n; ++i) {
            const double d = xs[static_cast<size_t>(row * n + i)] - mean;
            var += d * d;
        }
        var /= n;
        for (int64_t i = 0; i < n; ++i) {
            const size_t k = static_cast<size_t>(row * n + i);
            EXPECT_NEAR(r[k], xs[k] / std::sqrt(ss / n + eps), 1e-5);
            EXPECT_NEAR(l[k], (xs[k] - mean) / std::sqrt(var + eps), 1e-5);
        }
    }
}

TEST(Norms, HandComputedRmsNorm) {
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {4});
    g.set<float>(x, {1, 1, 1, 1});
    const int y = g.tensor(DWELL_F32, {4});
    const int z = g.tensor(DWELL_F32, {4});
    g.node(DWELL_OP_RMS_NORM, y, {x}, {}, {0.0f});
    g.node(DWELL_OP_LAYER_NORM, z, {y}, {}, {1.0f});
    ASSERT_FALSE(g.run());
    EXPECT_EQ(g.f32(y), (std::vector<float>{1, 1, 1, 1}));
    EXPECT_EQ(g.f32(z), (std::vector<float>{0, 0, 0, 0}));  // x - mean = 0
}

}  // namespace
}  // namespace dwell::cpu
