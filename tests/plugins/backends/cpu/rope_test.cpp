// ROPE: hand-computed rotations at position 1 in both modes, pass-through
// of unrotated dims, linear position scaling, ggml's float angle sequence,
// and a double-precision reference over many positions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu_test_graph.hpp"

namespace dwell::cpu {
namespace {

using test::TestGraph;

std::vector<float> rope(const std::vector<float>& xs, int64_t hd, int64_t n_head,
                        const std::vector<int32_t>& pos, int mode, int n_rot, float base,
                        float scale, unsigned threads = 1) {
    TestGraph g;
    const auto t = static_cast<int64_t>(pos.size());
    const int x = g.tensor(DWELL_F32, {hd, n_head, t});
    const int p = g.tensor(DWELL_I32, {t});
    const int y = g.tensor(DWELL_F32, {hd, n_head, t});
    g.set(x, xs);
    g.set(p, pos);
    g.node(DWELL_OP_ROPE, y, {x, p}, {mode, n_rot}, {base, scale});
    const auto problem = g.run(threads);
    EXPECT_FALSE(problem) << problem->message;
    return g.f32(y);
}

TEST(Rope, NormModeByHandAtPositionOne) {
    // head_dim 4, n_rot 4, base 10000: pair (0,1) turns by 1 rad, pair (2,3)
    // by 10000^(-1/2) = 0.01 rad.
    const auto y = rope({1, 2, 3, 4}, 4, 1, {1}, DWELL_ROPE_NORM, 4, 10000.0f, 1.0f);
    EXPECT_NEAR(y[0], 1 * 0.5403023058681398 - 2 * 0.8414709848078965, 1e-6);  // -1.14263966
    EXPECT_NEAR(y[1], 1 * 0.8414709848078965 + 2 * 0.5403023058681398, 1e-6);  // 1.92207560
    EXPECT_NEAR(y[2], 3 * 0.9999500004166653 - 4 * 0.0099998333341667, 1e-6);  // 2.95985067
    EXPECT_NEAR(y[3], 3 * 0.0099998333341667 + 4 * 0.9999500004166653, 1e-6);  // 4.02979950
}

TEST(Rope, NeoxModeByHandAtPositionOne) {
    // Pairs are (0,2) at 1 rad and (1,3) at 0.01 rad.
    const auto y = rope({1, 2, 3, 4}, 4, 1, {1}, DWELL_ROPE_NEOX, 4, 10000.0f, 1.0f);
    EXPECT_NEAR(y[0], -1.9841106485555495, 1e-6);
    EXPECT_NEAR(y[2], 2.462377902412316, 1e-6);
    EXPECT_NEAR(y[1], 1.959900667496664, 1e-6);
    EXPECT_NEAR(y[3], 4.019799668334995, 1e-6);
}

TEST(Rope, PositionZeroIsIdentityAndUnrotatedDimsPassThrough) {
    const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    EXPECT_EQ(rope(x, 6, 2, {0}, DWELL_ROPE_NORM, 4, 10000.0f, 1.0f), x);
    const auto y = rope(x, 6, 2, {3}, DWELL_ROPE_NEOX, 4, 10000.0f, 1.0f);
    for (int h = 0; h < 2; ++h) {
        EXPECT_EQ(y[static_cast<size_t>(6 * h + 4)], x[static_cast<size_t>(6 * h + 4)]);
        EXPECT_EQ(y[static_cast<size_t>(6 * h + 5)], x[static_cast<size_t>(6 * h + 5)]);
        EXPECT_NE(y[static_cast<size_t>(6 * h)], x[static_cast<size_t>(6 * h)]);
    }
}

TEST(Rope, FreqScaleHalvesTheAngle) {
    const auto xs = test::random_floats(32, 3);
    const auto a = rope(xs, 32, 1, {2}, DWELL_ROPE_NORM, 32, 10000.0f, 0.5f);
    const auto b = rope(xs, 32, 1, {1}, DWELL_ROPE_NORM, 32, 10000.0f, 1.0f);
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
}

TEST(Rope, FollowsGgmlFloatAngleSequence) {
    // ggml: theta_scale = powf(base, -2/n_rot); theta = p, then theta *=
    // theta_scale per pair, angle = freq_scale * theta, all in float.
    const int hd = 64, n_rot = 64;
    const int32_t pos = 300;
    const float base = 10000.0f, fscale = 1.0f;
    std::vector<float> x(static_cast<size_t>(hd), 0.0f);
    for (int i = 0; i < hd; i += 2) x[static_cast<size_t>(i)] = 1.0f;  // (1, 0) pairs
    const auto y = rope(x, hd, 1, {pos}, DWELL_ROPE_NORM, n_rot, base, fscale);
    const float theta_scale = std::pow(base, -2.0f / n_rot);
    float theta = static_cast<float>(pos);
    for (int i = 0; i < n_rot / 2; ++i) {
        const float angle = fscale * theta;
        EXPECT_NEAR(y[static_cast<size_t>(2 * i)], std::cos(angle), 2e-7) << i;
        EXPECT_NEAR(y[static_cast<size_t>(2 * i + 1)], std::sin(angle), 2e-7) << i;
        theta *= theta_scale;
    }
}

TEST(Rope, MatchesDoubleReferenceOverPositionsModesAndThreads) {
    const int64_t hd = 64, n_head = 3;
    const std::vector<int32_t> pos = {0, 1, 7, 40, 100};
    const auto t = static_cast<int64_t>(pos.size());
    const auto xs = test::random_floats(static_cast<size_t>(hd * n_head * t), 11);
    for (int mode : {DWELL_ROPE_NORM, DWELL_ROPE_NEOX}) {
        for (int n_rot : {64, 32}) {
            for (float base : {10000.0f, 500000.0f}) {
                const auto y = rope(xs, hd, n_head, pos, mode, n_rot, base, 1.0f, 1);
                EXPECT_EQ(y, rope(xs, hd, n_head, pos, mode, n_rot, base, 1.0f, 3));
                for (int64_t tok = 0; tok < t; ++tok) {
                    for (int64_t h = 0; h < n_head; ++h) {
                        const size_t o = static_cast<size_t>((tok * n_head + h) * hd);
                        for (int64_t i = 0; i < n_rot / 2; ++i) {
                            const double th = pos[static_cast<size_t>(tok)] *
                                              std::pow(static_cast<double>(base), -2.0 * i / n_rot);
                            const size_t i0 =
                                o + static_cast<size_t>(mode == DWELL_ROPE_NEOX ? i : 2 * i);
                            const size_t i1 =
                                o + static_cast<size_t>(mode == DWELL_ROPE_NEOX ? i + n_rot / 2
                                                                                : 2 * i + 1);
                            // The float angle drifts by a few ulps of theta per pair.
                            const double tol = 1e-6 + 2e-7 * th * (1 + i);
                            EXPECT_NEAR(y[i0], xs[i0] * std::cos(th) - xs[i1] * std::sin(th), tol);
                            EXPECT_NEAR(y[i1], xs[i0] * std::sin(th) + xs[i1] * std::cos(th), tol);
                        }
                        for (int64_t i = n_rot; i < hd; ++i) {
                            EXPECT_EQ(y[o + static_cast<size_t>(i)],
                                      xs[o + static_cast<size_t>(i)]);
                        }
                    }
                }
            }
        }
    }
}

TEST(Rope, FrequencyFactorsAndAttnFactorFollowGgmlFloatSequence) {
    // ABI 1.5: angle = freq_scale * ((p * theta_scale^i) / f_i), cos and sin
    // times attn_factor, in float as ggml's rope cache rounds them; dims
    // past n_rot pass through.
    const int hd = 40, n_rot = 32;
    const int32_t pos = 1234;
    const float base = 500000.0f, fscale = 0.25f, attn = 1.1902380714238083f;
    for (const int mode : {DWELL_ROPE_NORM, DWELL_ROPE_NEOX}) {
        std::vector<float> x(static_cast<size_t>(hd), 0.0f);
        const int half = n_rot / 2;
        const auto first = [&](int i) { return mode == DWELL_ROPE_NEOX ? i : 2 * i; };
        const auto second = [&](int i) { return mode == DWELL_ROPE_NEOX ? i + half : 2 * i + 1; };
        for (int i = 0; i < half; ++i) x[static_cast<size_t>(first(i))] = 1.0f;  // (1, 0) pairs
        x[static_cast<size_t>(hd - 1)] = 0.75f;
        std::vector<float> factors(static_cast<size_t>(half));
        for (int i = 0; i < half; ++i) factors[static_cast<size_t>(i)] = 1.0f + 0.37f * float(i);

        TestGraph g;
        const int xt = g.tensor(DWELL_F32, {hd, 1, 1});
        const int p = g.tensor(DWELL_I32, {1});
        const int f = g.tensor(DWELL_F32, {half});
        const int y = g.tensor(DWELL_F32, {hd, 1, 1});
        g.set(xt, x);
        g.set(p, std::vector<int32_t>{pos});
        g.set(f, factors);
        g.node(DWELL_OP_ROPE, y, {xt, p, f}, {mode, n_rot}, {base, fscale, attn});
        const auto problem = g.run(1);
        ASSERT_FALSE(problem) << problem->message;
        const auto out = g.f32(y);

        const float theta_scale = std::pow(base, -2.0f / n_rot);
        float theta = static_cast<float>(pos);
        for (int i = 0; i < half; ++i) {
            const float angle = fscale * (theta / factors[static_cast<size_t>(i)]);
            EXPECT_NEAR(out[static_cast<size_t>(first(i))], std::cos(angle) * attn, 3e-7) << i;
            EXPECT_NEAR(out[static_cast<size_t>(second(i))], std::sin(angle) * attn, 3e-7) << i;
            theta *= theta_scale;
        }
        EXPECT_EQ(out[static_cast<size_t>(hd - 1)], 0.75f);
    }
}

TEST(Rope, ZeroAttnFactorMeansNoneAsForTwoParameterNodes) {
    const auto xs = test::random_floats(2 * 16 * 3, 9);
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {16, 2, 3});
    const int p = g.tensor(DWELL_I32, {3});
    const int a = g.tensor(DWELL_F32, {16, 2, 3});
    const int b = g.tensor(DWELL_F32, {16, 2, 3});
    g.set(x, xs);
    g.set(p, std::vector<int32_t>{0, 3, 9});
    g.node(DWELL_OP_ROPE, a, {x, p}, {DWELL_ROPE_NORM, 16}, {10000.0f, 1.0f});
    g.node(DWELL_OP_ROPE, b, {x, p}, {DWELL_ROPE_NORM, 16}, {10000.0f, 1.0f, 1.0f});
    const auto problem = g.run(1);
    ASSERT_FALSE(problem) << problem->message;
    EXPECT_EQ(g.f32(a), g.f32(b));
}

TEST(Rope, RejectsBadParameters) {
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {8, 2, 3});
    const int p = g.tensor(DWELL_I32, {3});
    const int p_wrong = g.tensor(DWELL_I32, {2});
    const int y = g.tensor(DWELL_F32, {8, 2, 3});
    const int odd = g.node(DWELL_OP_ROPE, y, {x, p}, {DWELL_ROPE_NORM, 3}, {10000.0f, 1.0f});
    const int big = g.node(DWELL_OP_ROPE, y, {x, p}, {DWELL_ROPE_NORM, 10}, {10000.0f, 1.0f});
    const int mode = g.node(DWELL_OP_ROPE, y, {x, p}, {7, 8}, {10000.0f, 1.0f});
    const int npos = g.node(DWELL_OP_ROPE, y, {x, p_wrong}, {DWELL_ROPE_NORM, 8}, {10000.0f, 1.0f});
    const int base = g.node(DWELL_OP_ROPE, y, {x, p}, {DWELL_ROPE_NORM, 8}, {0.0f, 1.0f});
    const int ok = g.node(DWELL_OP_ROPE, y, {x, p}, {DWELL_ROPE_NEOX, 8}, {10000.0f, 1.0f});
    const int f_wrong = g.tensor(DWELL_F32, {3});
    const int f_ok = g.tensor(DWELL_F32, {4});
    const int fshape =
        g.node(DWELL_OP_ROPE, y, {x, p, f_wrong}, {DWELL_ROPE_NORM, 8}, {10000.0f, 1.0f});
    const int attn = g.node(DWELL_OP_ROPE, y, {x, p, f_ok}, {DWELL_ROPE_NORM, 8},
                            {10000.0f, 1.0f, std::numeric_limits<float>::infinity()});
    const int with_factors =
        g.node(DWELL_OP_ROPE, y, {x, p, f_ok}, {DWELL_ROPE_NORM, 8}, {10000.0f, 1.0f, 1.5f});
    for (int n : {odd, big, mode, npos, base, fshape, attn}) EXPECT_TRUE(g.check(n)) << n;
    EXPECT_FALSE(g.check(with_factors));
    EXPECT_FALSE(g.check(ok));
}

}  // namespace
}  // namespace dwell::cpu
