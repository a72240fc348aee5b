// SHORT_CONV (ABI 1.6) against a double-precision scalar reference of
// graph.h's definition: the window is the carried state then the batch, the
// output every channel's taps over it, the new state its last K - 1 rows.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu_test_graph.hpp"

namespace dwell::cpu {
namespace {

using test::random_floats;
using test::TestGraph;

struct Reference {
    std::vector<double> out;   // [T][C]
    std::vector<float> state;  // [K - 1][C]
};

// xs [T][C], taps [C][K], state [K - 1][C].
Reference reference(const std::vector<float>& xs, const std::vector<float>& taps,
                    const std::vector<float>& state, int64_t C, int64_t K) {
    const int64_t S = K - 1;
    const int64_t T = static_cast<int64_t>(xs.size()) / C;
    std::vector<float> window(state);
    window.insert(window.end(), xs.begin(), xs.end());
    Reference r;
    r.out.assign(static_cast<size_t>(T * C), 0.0);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c)
            for (int64_t j = 0; j < K; ++j)
                r.out[static_cast<size_t>(t * C + c)] +=
                    double{taps[static_cast<size_t>(c * K + j)]} *
                    window[static_cast<size_t>((t + j) * C + c)];
    r.state.assign(window.end() - S * C, window.end());
    return r;
}

struct ConvResult {
    std::vector<float> out;
    std::vector<float> state;
};

// One SHORT_CONV node over xs [T][C] from `state`, rows padded so that the
// kernel must go through the strides.
ConvResult run_conv(const std::vector<float>& xs, const std::vector<float>& taps,
                    const std::vector<float>& state, int64_t C, int64_t K, unsigned threads,
                    dwell_dtype kernel_dtype = DWELL_F32) {
    const int64_t T = static_cast<int64_t>(xs.size()) / C;
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {C, T}, 12);
    const int w = g.tensor(kernel_dtype, {K, C}, 4);
    const int s = g.tensor(DWELL_F32, {C, K - 1}, 8);
    const int y = g.tensor(DWELL_F32, {C, T});
    g.set<float>(x, xs);
    if (kernel_dtype == DWELL_F16) {
        std::vector<uint16_t> h(taps.size());
        for (size_t i = 0; i < h.size(); ++i) h[i] = dwell_fp32_to_fp16(taps[i]);
        g.set<uint16_t>(w, h);
    } else {
        g.set<float>(w, taps);
    }
    g.set<float>(s, state);
    g.node(DWELL_OP_SHORT_CONV, y, {x, w, s});
    const auto p = g.run(threads);
    EXPECT_FALSE(p) << p->message;
    return {g.f32(y), g.f32(s)};
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
}

// One batch of T > K - 1 from a non-zero state, for K = 3 and K = 4, with
// more channels than one thread's chunk.
TEST(ShortConv, BatchFromCarriedStateMatchesReference) {
    for (const int64_t K : {3, 4}) {
        for (const int64_t C : {int64_t{37}, int64_t{600}}) {
            SCOPED_TRACE("K = " + std::to_string(K) + ", C = " + std::to_string(C));
            const int64_t T = 7;
            const auto xs = random_floats(static_cast<size_t>(T * C), 1, -2.0f, 2.0f);
            const auto taps = random_floats(static_cast<size_t>(C * K), 2);
            const auto state = random_floats(static_cast<size_t>((K - 1) * C), 3, -2.0f, 2.0f);
            const Reference want = reference(xs, taps, state, C, K);
            const ConvResult got = run_conv(xs, taps, state, C, K, 3);
            expect_near_all(got.out, want.out, 1e-5);
            EXPECT_EQ(got.state, want.state);
        }
    }
}

// Decoding one token per step (T = 1 < K - 1 for K = 4: the old state
// shifts in place) gives what the whole sequence gives in one batch.
TEST(ShortConv, OneTokenStepsCarryTheStateLikeOneBatch) {
    for (const int64_t K : {3, 4}) {
        SCOPED_TRACE("K = " + std::to_string(K));
        const int64_t C = 45;
        const int64_t T = 6;
        const auto xs = random_floats(static_cast<size_t>(T * C), 4, -2.0f, 2.0f);
        const auto taps = random_floats(static_cast<size_t>(C * K), 5);
        const std::vector<float> zero(static_cast<size_t>((K - 1) * C), 0.0f);
        const Reference want = reference(xs, taps, zero, C, K);

        std::vector<float> state = zero;
        std::vector<float> outs;
        for (int64_t t = 0; t < T; ++t) {
            const std::vector<float> step(xs.begin() + t * C, xs.begin() + (t + 1) * C);
            const ConvResult r = run_conv(step, taps, state, C, K, 2);
            outs.insert(outs.end(), r.out.begin(), r.out.end());
            state = r.state;
        }
        expect_near_all(outs, want.out, 1e-5);
        EXPECT_EQ(state, want.state);
    }
}

// An F16 kernel is read as its F32 values.
TEST(ShortConv, HalfKernelMatchesReferenceOfRoundedTaps) {
    const int64_t C = 20, K = 3, T = 4;
    const auto xs = random_floats(static_cast<size_t>(T * C), 6);
    auto taps = random_floats(static_cast<size_t>(C * K), 7);
    for (float& t : taps) t = dwell_fp16_to_fp32(dwell_fp32_to_fp16(t));
    const std::vector<float> state = random_floats(static_cast<size_t>((K - 1) * C), 8);
    const Reference want = reference(xs, taps, state, C, K);
    const ConvResult got = run_conv(xs, taps, state, C, K, 1, DWELL_F16);
    expect_near_all(got.out, want.out, 1e-5);
    EXPECT_EQ(got.state, want.state);
}

TEST(ShortConv, BadShapesRejected) {
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {8, 3});
    const int w = g.tensor(DWELL_F32, {3, 8});
    const int w1 = g.tensor(DWELL_F32, {1, 8});
    const int w_wide = g.tensor(DWELL_F32, {3, 9});
    const int s = g.tensor(DWELL_F32, {8, 2});
    const int s_short = g.tensor(DWELL_F32, {8, 1});
    const int y = g.tensor(DWELL_F32, {8, 3});
    const int y_bad = g.tensor(DWELL_F32, {8, 2});
    const int ok = g.node(DWELL_OP_SHORT_CONV, y, {x, w, s});
    EXPECT_FALSE(g.check(ok));
    EXPECT_EQ(g.check(g.node(DWELL_OP_SHORT_CONV, y, {x, w1, s}))->status,
              DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(g.check(g.node(DWELL_OP_SHORT_CONV, y, {x, w_wide, s}))->status,
              DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(g.check(g.node(DWELL_OP_SHORT_CONV, y, {x, w, s_short}))->status,
              DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(g.check(g.node(DWELL_OP_SHORT_CONV, y_bad, {x, w, s}))->status,
              DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(g.check(g.node(DWELL_OP_SHORT_CONV, y, {x, w})));
}

}  // namespace
}  // namespace dwell::cpu
